"""``GET /api/v1/conversations/{id}/context?draft=…`` — the plan for the next request."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request

from chatmem.turns.context_view import plan_for
from chatmem.web.deps import CurrentUser, DbSession

router = APIRouter(prefix="/api/v1/conversations", tags=["context"])


@router.get("/{conversation_id}/context")
def get_context(
    conversation_id: str,
    request: Request,
    user: CurrentUser,
    session: DbSession,
    draft: Annotated[str | None, Query(max_length=1_000_000)] = None,
) -> dict[str, Any]:
    """What goes into the next request (CONTRACT plan JSON); the draft counts as the newest
    user message.  Served from a per-conversation cache: history is not re-read."""
    turns = request.app.state.turns
    return plan_for(
        session, turns.context_cache, user.id, conversation_id, draft, turns.known_tools
    )
