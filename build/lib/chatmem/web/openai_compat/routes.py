"""``POST /v1/chat/completions`` and ``GET /v1/models``, authenticated with a chatmem API
token (``Authorization: Bearer …``).

A completion is a chatmem turn (:meth:`chatmem.turns.service.TurnService.submit_history`): the
answer streams as the run's events arrive (``stream: true``) or is returned whole.  The
conversation is named by the ``X-Chatmem-Conversation`` header (or ``metadata.
conversation_id``, or ``user: "conversation:<key>"``) — a chatmem id or the client's own key
— else found by the history it repeats (API-1, :mod:`chatmem.turns.history_turns`), and named
back in the answer's header of the same name (the client's key when it chose one) — a new one
when none was found or the client's history diverged from the stored one.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Annotated, Any, cast

from fastapi import APIRouter, FastAPI, Header, Request
from fastapi.responses import JSONResponse, Response

from chatmem.errors import NotFound
from chatmem.store.profiles import AUTO_PROFILE, visible_profiles
from chatmem.store.sessions import Session
from chatmem.turns.events import Error, RunEvent
from chatmem.web.api.routes.turns import UserId, turn_service
from chatmem.web.deps import CurrentUser, DbSession
from chatmem.web.errors import STATUS_BY_CODE
from chatmem.web.openai_compat.answers import Answer, first_shown, shown
from chatmem.web.openai_compat.errors import openai_error
from chatmem.web.openai_compat.schemas import ChatCompletionRequest
from chatmem.web.sse import KEEPALIVE, EventStreamResponse, batches

router = APIRouter(prefix="/v1", tags=["openai-compatible"])

CONVERSATION_HEADER = "X-Chatmem-Conversation"

_ERROR = {
    "description": 'OpenAI\'s error shape: `{"error": {"message", "type", "code"}}`',
    "content": {"application/json": {"schema": {"type": "object", "required": ["error"]}}},
}
ERRORS: dict[int | str, dict[str, Any]] = {
    status: _ERROR for status in (400, 401, 403, 404, 405, 409, 413, 429, 502)
}


def _failed(error: dict[str, Any], headers: dict[str, str]) -> JSONResponse:
    code = str(error.get("code") or "provider_error")
    return openai_error(
        code, str(error.get("message", "")), STATUS_BY_CODE.get(code, 502), error, headers
    )


@router.post(
    "/chat/completions",
    responses={
        200: {
            "description": "`chat.completion`, or with `stream: true` a stream of "
            "`chat.completion.chunk` objects ending with `data: [DONE]`; the conversation's "
            "id in `X-Chatmem-Conversation`",
            "content": {"text/event-stream": {}},
        },
        **ERRORS,
    },
)
async def chat_completions(
    body: ChatCompletionRequest,
    request: Request,
    user_id: UserId,
    x_chatmem_conversation: Annotated[str | None, Header(max_length=200)] = None,
) -> Response:
    """A turn in a chatmem conversation, answered in OpenAI's format."""
    service = turn_service(request)
    turn = await service.submit_history(
        user_id,
        body.said(),
        model=body.model,
        conversation_id=body.conversation_name(x_chatmem_conversation),
        tools=body.offered_tools(),
        options=body.options(),
        store=body.store is not False,
    )
    headers = (
        {
            CONVERSATION_HEADER: turn.client_key or turn.conversation_id,
            "X-Chatmem-Run-Id": turn.run_id,
        }
        if turn.events is None
        else {}  # store: false — no conversation, no run
    )
    # An async generator: closed when the client goes (a run goes on; a stateless answer
    # stops).
    events = cast(AsyncGenerator[RunEvent, None], service.turn_events(user_id, turn))
    answer = Answer(turn.run_id, turn.model)
    if not body.stream:
        async with contextlib.aclosing(events):
            async for event in events:
                if shown(event):
                    answer.take(event)
        if answer.error is not None:
            return _failed(answer.error.data, headers)
        return JSONResponse(answer.completion(), headers=headers)
    # The first event decides the status: a turn refused by the provider or the plan at once
    # is an error response the SDK raises, not a stream that breaks.
    first = await first_shown(events)
    if first is None or isinstance(first, Error):
        await events.aclose()
        return _failed(first.data if first else {"code": "provider_error"}, headers)
    head = answer.chunk({"role": "assistant", "content": ""}) + answer.frames(
        first, include_usage=body.include_usage
    )

    async def rest() -> AsyncIterator[str]:
        if first.terminal:
            await events.aclose()
            return
        try:
            async with contextlib.aclosing(batches(events)) as waiting:
                async for batch in waiting:
                    if not batch:
                        yield KEEPALIVE  # OpenAI's clients skip SSE comments
                        continue
                    frames = "".join(
                        answer.frames(event, include_usage=body.include_usage)
                        for event in batch
                        if shown(event)
                    )
                    if frames:
                        yield frames
        finally:
            await events.aclose()

    return EventStreamResponse(
        head, rest(), headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no", **headers}
    )


def _model(id_: str, created: int, owned_by: str, profile_id: str | None) -> dict[str, Any]:
    return {
        "id": id_,
        "object": "model",
        "created": created,
        "owned_by": owned_by,
        "chatmem_profile_id": profile_id,
    }


@router.get("/models", responses=ERRORS)
def list_models(user: CurrentUser, session: DbSession) -> dict[str, Any]:
    """The user's model profiles in OpenAI's shape (``id``: the profile's name, or its id
    when an earlier profile has the name), and ``auto``."""
    return {"object": "list", "data": _models(session, user.id)}


@router.get("/models/{model}", responses=ERRORS)
def get_model(model: str, user: CurrentUser, session: DbSession) -> dict[str, Any]:
    """One entry of ``GET /v1/models``, by its ``id`` or the profile's id."""
    for entry in _models(session, user.id):
        if model in (entry["id"], entry["chatmem_profile_id"]):
            return entry
    raise NotFound("model")


def _models(session: Session, user_id: str) -> list[dict[str, Any]]:
    data: list[dict[str, Any]] = []
    taken = {AUTO_PROFILE}
    # The user's own first: a name shared with a shared profile means theirs (as in use).
    for profile in sorted(visible_profiles(session, user_id), key=lambda p: p.shared):
        name = profile.name if profile.name not in taken else profile.id
        taken.add(name)
        owner = "chatmem-shared" if profile.shared else "chatmem"
        data.append(_model(name, int(profile.created_at.timestamp()), owner, profile.id))
    data.append(_model(AUTO_PROFILE, 0, "chatmem", None))
    return data


def install_openai_compat(app: FastAPI) -> None:
    app.include_router(router)
