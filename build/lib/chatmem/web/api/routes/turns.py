"""``POST /api/v1/conversations/{id}/turns`` (TURN-1, TURN-6) and the conversation's runs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, TypeVar

import anyio
from fastapi import APIRouter, Depends, Header, Query, Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, Field

from chatmem.store import runs
from chatmem.store.conversations import owned_conversation_row
from chatmem.turns.admission import Redo
from chatmem.turns.service import Submitted, TurnService
from chatmem.web.deps import CurrentUser, DbSession, authenticated_user_id
from chatmem.web.sse import follow
from chatmem.web.views.runs import run_public

T = TypeVar("T")

router = APIRouter(prefix="/api/v1/conversations", tags=["turns"])


class TurnCreate(BaseModel):
    content: str = Field(default="", max_length=1_000_000)
    file_ids: list[str] = Field(default_factory=list, max_length=100)
    #: APPS-3: the tool call whose app sends this message (``ui/message``).
    app_tool_call_id: str | None = Field(default=None, min_length=1, max_length=64)


def _authenticate(request: Request) -> str:
    return authenticated_user_id(request)


async def short_read(request: Request, fn: Callable[[Request], T]) -> T:
    """Runs a one-query read for an async route.

    On SQLite it runs right here on the event loop: a WAL reader never waits for a writer,
    the query takes a fraction of a millisecond, and a worker-thread hop costs more than that
    (two GIL hand-overs, each up to the 5 ms switch interval when the loop is busy — on the
    path to the first token).  On PostgreSQL a query is a network round trip, so it goes to
    a worker thread as usual."""
    if request.app.state.db.is_sqlite:
        return fn(request)
    return await anyio.to_thread.run_sync(fn, request)


async def authenticated(request: Request) -> str:
    """The signed-in user's id, for the async turn routes.

    Authenticates in its own short read transaction that ends before the route runs: the
    request-wide ``DbSession`` of a write request holds the SQLite write lock until the
    response, which would block the turn's own units of work.  Same rules as
    ``CurrentUser`` (Bearer token, or session cookie with the CSRF check)."""
    if request.app.state.credentials.knows(request):
        return authenticated_user_id(request)  # checked a moment ago: no query, no thread
    return await short_read(request, _authenticate)


UserId = Annotated[str, Depends(authenticated)]


def turn_service(request: Request) -> TurnService:
    turns: TurnService = request.app.state.turns
    return turns


@router.post(
    "/{conversation_id}/turns",
    status_code=202,
    responses={
        200: {
            "description": "With `Accept: text/event-stream`: the run's events (as `GET "
            "/api/v1/runs/{id}/events`), its id in `X-Chatmem-Run-Id`",
            "content": {"text/event-stream": {}},
        }
    },
)
async def start_turn(
    conversation_id: str,
    body: TurnCreate,
    request: Request,
    user_id: UserId,
    idempotency_key: Annotated[str | None, Header(max_length=200)] = None,
) -> Response:
    """Stores the message and starts the turn as a server-owned task; answers 202 at once
    with its run id.  With ``Accept: text/event-stream`` it answers with the run's events
    instead, in the same response (one request to the first token); the run stays the
    server's: a client that goes away stops nothing, and may follow it again with ``GET
    /api/v1/runs/{id}/events``.  ``app_tool_call_id``: an app's ``ui/message`` (APPS-3) —
    a call of this conversation with an app; the message says it came from that app."""
    service = turn_service(request)
    submitted = await service.submit(
        user_id,
        conversation_id,
        body.content,
        file_ids=body.file_ids,
        idempotency_key=idempotency_key or None,
        from_app=body.app_tool_call_id,
    )
    if "text/event-stream" in request.headers.get("accept", ""):
        return await follow(
            service.watch(user_id, submitted.run_id, 0, owner_checked=True),
            headers={"X-Chatmem-Run-Id": submitted.run_id},
        )
    return JSONResponse({"run_id": submitted.run_id, "created": submitted.created}, status_code=202)


class EditBody(BaseModel):
    content: str = Field(max_length=1_000_000)
    file_ids: list[str] = Field(default_factory=list, max_length=100)


class VersionChoice(BaseModel):
    index: int = Field(ge=1, le=1_000_000)


def _accepted(submitted: Submitted) -> Response:
    return JSONResponse({"run_id": submitted.run_id, "created": submitted.created}, status_code=202)


@router.post("/{conversation_id}/messages/{message_id}/regenerate", status_code=202)
async def regenerate(
    conversation_id: str,
    message_id: str,
    request: Request,
    user_id: UserId,
    idempotency_key: Annotated[str | None, Header(max_length=200)] = None,
) -> Response:
    """PROJ-3: answers the last question again (``message_id``: the question or a message
    of its answer; also Retry after a failed turn).  The answer shown becomes a hidden
    version; 202 with the new run's id, as a turn."""
    submitted = await turn_service(request).redo(
        user_id,
        conversation_id,
        Redo(message_id, regenerate=True),
        idempotency_key=idempotency_key or None,
    )
    return _accepted(submitted)


@router.post("/{conversation_id}/messages/{message_id}/edit", status_code=202)
async def edit_and_resend(
    conversation_id: str,
    message_id: str,
    body: EditBody,
    request: Request,
    user_id: UserId,
    idempotency_key: Annotated[str | None, Header(max_length=200)] = None,
) -> Response:
    """PROJ-3: the last question, edited and sent again: it and its answer become a hidden
    version, the new question is stored and answered; 202 with the run's id, as a turn."""
    submitted = await turn_service(request).redo(
        user_id,
        conversation_id,
        Redo(message_id, regenerate=False),
        body.content,
        file_ids=body.file_ids,
        idempotency_key=idempotency_key or None,
    )
    return _accepted(submitted)


@router.put("/{conversation_id}/messages/{message_id}/version")
async def choose_version(
    conversation_id: str,
    message_id: str,
    body: VersionChoice,
    request: Request,
    user_id: UserId,
) -> dict[str, Any]:
    """PROJ-3: shows version ``index`` (1-based) of the slot ``message_id`` is shown in —
    the question's versions for a question, the answer's for an answer; only the version
    shown is in memory.  Answers ``{"kind", "version", "versions"}``."""
    return await turn_service(request).switch_version(
        user_id, conversation_id, message_id, body.index
    )


@router.get("/{conversation_id}/runs")
def list_runs(
    conversation_id: str,
    user: CurrentUser,
    session: DbSession,
    active: Annotated[bool, Query()] = False,
) -> dict[str, Any]:
    """The conversation's runs, newest first; ``?active=1`` finds a running turn."""
    owned_conversation_row(session, user.id, conversation_id)
    items = runs.conversation_runs(session, conversation_id, active_only=active)
    return {"items": [run_public(r) for r in items]}
