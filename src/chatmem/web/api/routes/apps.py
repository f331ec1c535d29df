"""MCP Apps (APPS-1 … APPS-4): what the feed renders a tool call's app from, and what an app
asks of its server — always through chatmem's server, never from the browser to an MCP
server.  Every route answers the owner of the call's conversation only (``not_found``
otherwise, STORE-1)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request

from chatmem.tools.app_host import AppHost
from chatmem.web.api.routes.turns import UserId
from chatmem.web.views.apps import app_public

router = APIRouter(prefix="/api/v1", tags=["apps"])


def app_host(request: Request) -> AppHost:
    host: AppHost = request.app.state.turns.apps
    return host


@router.get("/tool-calls/{tool_call_id}/app")
async def get_app(tool_call_id: str, request: Request, user_id: UserId) -> dict[str, Any]:
    """APPS-1: the call's app — its HTML as chatmem's server fetched it (cached per server,
    URI and server version; at most 2 MB), its declared CSP domains, its permissions, the
    call's input and whole result as stored, ``available`` and a ``note`` when the server is
    down (the stored text result is shown then)."""
    return app_public(await app_host(request).show(user_id, tool_call_id))
