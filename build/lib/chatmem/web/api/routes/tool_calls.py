"""``GET /api/v1/admin/tool-calls``: every MCP tool call, for administrators (PROV-6).

Newest first, paged with ``before`` (the last id of the previous page, answered as
``next_before``); filter by ``user_id`` or ``server_id``.  Each row says who, when, which
server and tool, the SHA-256 digest of the arguments (not the arguments: they may hold a
user's data), the outcome, the user's decision for an "ask first" tool, and the duration.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query
from pydantic import Field

from chatmem.store import tool_calls
from chatmem.web.api.schemas import Whole
from chatmem.web.deps import AdminUser, DbSession
from chatmem.web.views.runs import tool_call_public

router = APIRouter(prefix="/api/v1/admin/tool-calls", tags=["admin"])


@router.get("")
def list_tool_calls(
    _: AdminUser,
    session: DbSession,
    limit: Annotated[int, Field(ge=1, le=500), Whole] = 100,
    before: Annotated[str | None, Query(max_length=64)] = None,
    user_id: Annotated[str | None, Query(max_length=64)] = None,
    server_id: Annotated[str | None, Query(max_length=64)] = None,
) -> dict[str, Any]:
    entries, next_before = tool_calls.tool_call_page(
        session, limit=limit, before=before, user_id=user_id, server_id=server_id
    )
    items = [tool_call_public(e.call, e.user_name) for e in entries]
    return {"items": items, "next_before": next_before}
