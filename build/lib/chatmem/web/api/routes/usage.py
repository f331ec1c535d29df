"""``GET /api/v1/usage`` and ``POST /api/v1/usage/extension-requests`` (USE-1 … USE-3)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from chatmem.turns.usage import request_extension, usage_summary
from chatmem.web.deps import CurrentUser, DbSession, SettingsDep
from chatmem.web.views.usage import extension_public, usage_public

router = APIRouter(prefix="/api/v1/usage", tags=["usage"])


@router.get("")
def get_usage(user: CurrentUser, session: DbSession, settings: SettingsDep) -> dict[str, Any]:
    """Spent per conversation, per rolling session window and per week, with included usage."""
    return usage_public(usage_summary(session, user.id, settings))


@router.post("/extension-requests")
def post_extension_request(
    user: CurrentUser, session: DbSession, settings: SettingsDep
) -> dict[str, Any]:
    """Notifies the administrators; a second request soon after answers "already notified"."""
    return extension_public(request_extension(session, user.id, settings))
