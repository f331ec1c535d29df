"""Runs: status, stop, and the Server-Sent Events stream (TURN-1, TURN-2, TURN-6)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Header, Query, Request

from chatmem.errors import NotFound
from chatmem.store import runs
from chatmem.web.api.routes.turns import UserId, short_read, turn_service
from chatmem.web.api.schemas import Seq
from chatmem.web.deps import CurrentUser, DbSession, authenticated_user_id
from chatmem.web.sse import EventStreamResponse, follow
from chatmem.web.views.runs import run_public

router = APIRouter(prefix="/api/v1/runs", tags=["runs"])


@router.get("/{run_id}")
def get_run(run_id: str, user: CurrentUser, session: DbSession) -> dict[str, Any]:
    return run_public(runs.owned_run(session, user.id, run_id))


@router.post("/{run_id}/stop")
async def stop_run(run_id: str, request: Request, user_id: UserId) -> dict[str, Any]:
    """Stops the turn; what was completed (and the text streamed so far) is kept."""
    return run_public(await turn_service(request).stop(user_id, run_id))


@router.post("/{run_id}/tool-calls/{call_id}/approve")
async def approve_tool_call(
    run_id: str, call_id: str, request: Request, user_id: UserId
) -> dict[str, Any]:
    """PROV-6: the turn waiting on this "ask first" call makes it; answers the run."""
    return run_public(await turn_service(request).decide(user_id, run_id, call_id, "approved"))


@router.post("/{run_id}/tool-calls/{call_id}/refuse")
async def refuse_tool_call(
    run_id: str, call_id: str, request: Request, user_id: UserId
) -> dict[str, Any]:
    """PROV-6: the call is not made; its result tells the model the user refused it."""
    return run_public(await turn_service(request).decide(user_id, run_id, call_id, "refused"))


async def run_owner(run_id: str, request: Request) -> str:
    """Authenticates and checks the run belongs to the user, in one short read transaction
    (the events stream starts one round trip sooner; on SQLite without a thread hop).
    Returns the user's id."""

    def check(request: Request) -> str:
        user_id = authenticated_user_id(request)
        if not turn_service(request).runs_here(run_id, user_id):
            with request.app.state.db.read_connection() as connection:
                if runs.run_owner_id(connection, run_id) != user_id:
                    raise NotFound("run")
        return user_id

    return await short_read(request, check)


# Documented as what it is: a stream of events, each with its JSON data.
_EVENTS: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "Server-Sent Events: id, event, data (JSON)",
        "content": {
            "text/event-stream": {
                "schema": {
                    "type": "object",
                    "required": ["event", "data"],
                    "properties": {
                        "id": {"type": "string"},
                        "event": {"type": "string"},
                        "data": {"type": "string", "contentMediaType": "application/json"},
                    },
                }
            }
        },
    }
}


@router.get(
    "/{run_id}/events", response_class=EventStreamResponse, status_code=200, responses=_EVENTS
)
async def run_events(
    run_id: str,
    request: Request,
    user_id: Annotated[str, Depends(run_owner)],
    last_event_id: Annotated[Seq | None, Header()] = None,
    after: Annotated[Seq | None, Query()] = None,
) -> EventStreamResponse:
    """SSE: replays stored events after ``Last-Event-ID`` (or ``?after=``), then follows live;
    ends after ``done`` or ``error``."""
    cursor = last_event_id if last_event_id is not None else (after or 0)
    return await follow(turn_service(request).watch(user_id, run_id, cursor, owner_checked=True))
