"""``GET /api/v1/conversations/{id}/context?draft=…`` — the plan for the next request."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response

from chatmem.turns.context_view import plan_bytes, plan_for
from chatmem.turns.dbwork import read
from chatmem.web.api.routes.turns import UserId

router = APIRouter(prefix="/api/v1/conversations", tags=["context"])


@router.get("/{conversation_id}/context")
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
    )
    # Serialised directly (the generic encoder walks 10,000 statuses one by one), with the
    # status map encoded once per plan.
    return Response(plan_bytes(turns.context_cache, body), media_type="application/json")
