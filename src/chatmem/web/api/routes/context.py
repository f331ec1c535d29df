"""``GET /api/v1/conversations/{id}/context?draft=…`` — the plan for the next request — and
``GET /api/v1/profiles/{id}/context?draft=…&mode=…``, the same plan for a chat not created
yet (the counter follows the first message too, CTX-17)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response

from chatmem.context.values import Mode
from chatmem.turns.context_view import plan_bytes, plan_for, profile_plan_for
from chatmem.turns.dbwork import read
from chatmem.web.api.routes.turns import UserId

router = APIRouter(prefix="/api/v1", tags=["context"])


@router.get("/conversations/{conversation_id}/context")
async def get_context(
    conversation_id: str,
    request: Request,
    user_id: UserId,
    draft: Annotated[str | None, Query(max_length=1_000_000)] = None,
) -> Response:
    """What goes into the next request (CONTRACT plan JSON); the draft counts as the newest
    user message.  Served from a per-conversation cache: history is not re-read.

    Called on every keystroke: one read unit in one worker-thread hop (a plain route would
    hop for each dependency), with the remembered credentials of the turn routes."""
    turns = request.app.state.turns
    body = await read(
        request.app.state.db,
        plan_for,
        turns.context_cache,
        user_id,
        conversation_id,
        draft,
        turns.known_tools,
        turns.calibrations,
    )
    return Response(plan_bytes(body), media_type="application/json")


@router.get("/profiles/{profile_id}/context")
async def get_profile_context(
    profile_id: str,
    request: Request,
    user_id: UserId,
    draft: Annotated[str | None, Query(max_length=1_000_000)] = None,
    mode: Mode = "full",
) -> dict[str, object]:
    """The plan of a new conversation with this profile and memory mode: nothing stored yet,
    only the draft (and the instructions and tools every request carries).  404 for a
    profile the user may not use (STORE-1)."""
    turns = request.app.state.turns
    return await read(
        request.app.state.db,
        profile_plan_for,
        user_id,
        profile_id,
        draft,
        mode,
        turns.known_tools,
        turns.calibrations,
    )
