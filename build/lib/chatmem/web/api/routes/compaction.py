"""Manual compaction (CTX-11): ``POST …/compact`` and its price, ``GET …/compact/price``."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from pydantic import BaseModel, Field

from chatmem.web.api.routes.turns import UserId, turn_service
from chatmem.web.errors import PROVIDER_RESPONSES

router = APIRouter(prefix="/api/v1/conversations", tags=["compaction"])


class CompactRequest(BaseModel):
    focus: str | None = Field(default=None, max_length=2000)


@router.post("/{conversation_id}/compact", responses=PROVIDER_RESPONSES)
async def compact(
    conversation_id: str, request: Request, user_id: UserId, body: CompactRequest | None = None
) -> dict[str, Any]:
    """Replaces early messages with a summary, keeping the last question–answer pair; answers
    with the price and the new summary.  Refusals: ``nothing_to_compress``,
    ``compaction_running`` (also while a turn runs), ``insufficient_credits``."""
    focus = (body.focus or "").strip() or None if body else None
    return await turn_service(request).compact(user_id, conversation_id, focus)


@router.get("/{conversation_id}/compact/price")
async def compact_price(
    conversation_id: str,
    request: Request,
    user_id: UserId,
    focus: Annotated[str | None, Query(max_length=2000)] = None,
) -> dict[str, Any]:
    """The price of "Compress now", shown on the button before it runs (CTX-11)."""
    return await turn_service(request).compaction_price(user_id, conversation_id, focus or None)
