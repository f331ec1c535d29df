"""``POST /v1/responses``, ``GET`` and ``DELETE /v1/responses/{id}`` (API-3).

A response is a chatmem turn (:meth:`~chatmem.turns.service.TurnService.submit_history`),
exactly as a chat completion is: the provider is called with Chat Completions and gets the
engine's plan (memory, compaction, window).  Its id is ``resp_<run id>``.  Which
conversation: the one ``previous_response_id``'s response belongs to, or the one
``conversation`` names, else a new one; the client sends only what is new (the conversation
remembers the rest).  A stored response (``store``, the default) keeps a row
(:mod:`chatmem.store.openai_objects`) with the fields its object echoes; its output, status
and usage are read back from the run's stored events.  ``DELETE`` forgets the response: its
id is unknown afterwards, the conversation's messages stay (they are the user's chat).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from typing import Annotated, Any, cast

from fastapi import APIRouter, FastAPI, Header, Request
from fastapi.responses import JSONResponse, Response

from chatmem.errors import NotFound
from chatmem.store import openai_objects
from chatmem.store.types import new_id
from chatmem.store.units import read, work
from chatmem.turns.events import Error, RunEvent, from_stored
from chatmem.turns.history_turns import HistoryTurn
from chatmem.turns.service import TurnService
from chatmem.web.api.routes.turns import UserId, turn_service
from chatmem.web.openai_compat import conversations
from chatmem.web.openai_compat.answers import first_shown, shown
from chatmem.web.openai_compat.responses_events import (
    ResponseBuilder,
    response_id,
    run_id_of,
    sse,
)
from chatmem.web.openai_compat.responses_schemas import ResponsesRequest
from chatmem.web.openai_compat.routes import CONVERSATION_HEADER, ERRORS, _failed
from chatmem.web.sse import KEEPALIVE, EventStreamResponse, batches

router = APIRouter(prefix="/v1", tags=["openai-compatible"])


def _run_of(response: str) -> str:
    run_id = run_id_of(response)
    if run_id is None:
        raise NotFound("response")
    return run_id


async def _continued(
    service: TurnService, user_id: str, body: ResponsesRequest, header: str | None
) -> tuple[str | None, frozenset[str]]:
    """The conversation the request continues (``previous_response_id``'s, else the one
    ``conversation`` or the ``X-Chatmem-Conversation`` header names), and the output item
    and call ids of its previous response (a client echoing them does not store them
    twice)."""
    if body.previous_response_id is None:
        return body.conversation_id or header, frozenset()
    run_id = _run_of(body.previous_response_id)
    previous = await read(service.db, openai_objects.stored_response, user_id, run_id)
    builder = ResponseBuilder(run_id, "", {}, previous.response.conversation_id)
    builder.take_all([from_stored(e.seq, e.type, e.data) for e in previous.events])
    echoed = {str(item["id"]) for item in builder.output}
    echoed |= {str(item["call_id"]) for item in builder.output if "call_id" in item}
    return previous.response.conversation_id, frozenset(echoed)


async def _save(
    service: TurnService,
    user_id: str,
    turn: HistoryTurn,
    previous: str | None,
    echo: dict[str, Any],
    store: bool,
) -> None:
    """A stored response's row (none for ``store: false``: it is not kept)."""
    if not store:
        return
    await work(
        service.db,
        openai_objects.save_response,
        user_id,
        turn.run_id,
        turn.conversation_id,
        run_id_of(previous) if previous else None,
        echo,
    )


@router.post(
    "/responses",
    responses={
        200: {
            "description": "a `response` object, or with `stream: true` its stream of events "
            "(`response.created` … `response.completed`); the conversation's id in "
            "`X-Chatmem-Conversation`",
            "content": {"text/event-stream": {}},
        },
        **ERRORS,
    },
)
async def create_response(
    body: ResponsesRequest,
    request: Request,
    user_id: UserId,
    x_chatmem_conversation: Annotated[str | None, Header(max_length=200)] = None,
) -> Response:
    """A turn in a chatmem conversation, answered as OpenAI's Responses API answers."""
    body.check()
    service = turn_service(request)
    conversation_id, answered = await _continued(service, user_id, body, x_chatmem_conversation)
    turn = await service.submit_history(
        user_id,
        body.said(answered),
        model=body.model,
        conversation_id=conversation_id,
        tools=body.chat_tools(),
        options=body.options(),
        store=body.store,
    )
    echo = {**body.echo(), "model": turn.model}
    previous = body.previous_response_id

    def save() -> asyncio.Future[None]:
        return asyncio.ensure_future(_save(service, user_id, turn, previous, echo, body.store))

    headers = (
        {
            CONVERSATION_HEADER: turn.client_key or turn.conversation_id,
            "X-Chatmem-Run-Id": turn.run_id,
        }
        if turn.events is None
        else {}  # store: false — no conversation, no run: the response has an id of its own
    )
    builder = ResponseBuilder(
        turn.run_id or new_id(), turn.model, echo, turn.conversation_id or None, previous
    )
    events = cast(AsyncGenerator[RunEvent, None], service.turn_events(user_id, turn))
    if not body.stream:
        saved = save()
        async with contextlib.aclosing(events):
            async for event in events:
                builder.frames(event)
        await saved
        if builder.error is not None:
            return _failed(builder.error.data, headers)
        return JSONResponse(builder.obj(), headers=headers)
    return await _stream(builder, events, save, headers)


async def _stream(
    builder: ResponseBuilder,
    events: AsyncGenerator[RunEvent, None],
    save: Callable[[], asyncio.Future[None]],
    headers: dict[str, str],
) -> Response:
    """The response's events as Server-Sent Events."""
    # The first event decides the status, as for chat completions: a turn refused at once
    # (the plan does not fit, the provider refused) is an error the SDK raises.
    first = await first_shown(events)
    # The response's row is written beside the stream, off the way to its first token; the
    # stream's end waits for it, so a GET after the answer finds the response.
    saved = save()
    if first is None or isinstance(first, Error):
        await events.aclose()
        await saved
        return _failed(first.data if first else {"code": "provider_error"}, headers)
    if first.terminal:
        await saved
    head = "".join(sse(f) for f in [*builder.opening(), *builder.frames(first)])

    async def rest() -> AsyncIterator[str]:
        if first.terminal:
            await events.aclose()
            return
        try:
            async with contextlib.aclosing(batches(events)) as waiting:
                async for batch in waiting:
                    if not batch:
                        yield KEEPALIVE
                        continue
                    shown_now = [event for event in batch if shown(event)]
                    if any(event.terminal for event in shown_now):
                        await saved
                    frames = "".join(sse(f) for event in shown_now for f in builder.frames(event))
                    if frames:
                        yield frames
        finally:
            await events.aclose()
            if not saved.done():
                await saved

    return EventStreamResponse(
        head, rest(), headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no", **headers}
    )


@router.get("/responses/{response}", responses=ERRORS)
async def get_response(response: str, request: Request, user_id: UserId) -> dict[str, Any]:
    """A stored response as it is now (``in_progress`` while its turn runs)."""
    service = turn_service(request)
    stored = await read(service.db, openai_objects.stored_response, user_id, _run_of(response))
    record = stored.response
    previous = response_id(record.previous_run_id) if record.previous_run_id else None
    builder = ResponseBuilder(
        record.run_id,
        str(record.echo.get("model", "")),
        record.echo,
        record.conversation_id,
        previous,
        created_at=record.created_at.timestamp(),
    )
    builder.take_all([from_stored(e.seq, e.type, e.data) for e in stored.events])
    if builder.status == "in_progress" and stored.run.status != "running":
        # Ended without a terminal event the client is shown (recovery's own end).
        builder.status = "failed" if stored.run.status != "completed" else "completed"
    return builder.obj()


@router.delete("/responses/{response}", responses=ERRORS)
async def delete_response(response: str, request: Request, user_id: UserId) -> dict[str, Any]:
    """Forgets the response (its id is unknown afterwards); the conversation keeps its
    messages and the run stays in the usage ledger."""
    run_id = _run_of(response)
    await work(turn_service(request).db, openai_objects.forget_response, user_id, run_id)
    return {"id": response, "object": "response", "deleted": True}


def install_responses(app: FastAPI) -> None:
    """The Responses and Conversations APIs (API-3)."""
    app.include_router(router)
    app.include_router(conversations.router)
