"""``/api/v1/mcp-servers``: MCP servers, administrators only (TURN-4, PROF-4, PROV-3, PROV-6).

The URL is checked with the endpoint policy; headers (or a bearer token) are encrypted and
never returned — responses say ``has_headers``.  Each server carries its timeouts, its tool
policy (``allowed_tools``: null for all; ``ask_first_tools``) and its ``health`` as this
process sees it (state, last error and when, last success, the tools it lists).  A change
reconnects the server's session in the background at once.

MCP Apps (APPS-1, APPS-2, APPS-4): ``tools`` lists each tool with its ``app`` (its ``ui://``
resource and ``visibility``, or null); ``show_apps`` (default true) shows the apps in the
feed, ``workspace_tool`` names the tool "Open Live Workspace" calls (a tool of this server
with an app, else ``invalid_input``), ``app_permissions`` the browser permissions its apps
may be granted when they ask (none by default).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import anyio.from_thread
from fastapi import APIRouter, Request, Response
from pydantic import Field

from chatmem.models import mcp_servers as repo
from chatmem.store import admin as audit
from chatmem.store import mcp_servers as store
from chatmem.store.mcp_servers import McpServerRecord
from chatmem.store.sessions import Session
from chatmem.tools.known import stored_tools
from chatmem.tools.toolbox import KnownTool
from chatmem.web.api.schemas import Body
from chatmem.web.deps import AdminUser, DbSession
from chatmem.web.model_deps import EndpointPolicyDep, SecretsDep
from chatmem.web.views.mcp_servers import mcp_server_view

router = APIRouter(prefix="/api/v1/mcp-servers", tags=["mcp"])

Name = Annotated[str, Field(min_length=1, max_length=200)]
Url = Annotated[str, Field(min_length=1, max_length=2048)]
Seconds = Annotated[float, Field(gt=0)]
ToolNames = Annotated[
    list[Annotated[str, Field(min_length=1, max_length=300)]], Field(max_length=1000)
]
ToolName = Annotated[str, Field(min_length=1, max_length=300)]
Permissions = Annotated[
    list[Literal["camera", "microphone", "geolocation", "clipboard_write"]], Field(max_length=4)
]


class McpServerCreate(Body):
    name: Name
    url: Url
    headers: dict[str, str] | None = None
    bearer_token: Annotated[str, Field(max_length=4096)] | None = None
    enabled: bool = True
    connect_timeout: Seconds | None = None
    call_timeout: Seconds | None = None
    allowed_tools: ToolNames | None = None
    ask_first_tools: ToolNames | None = None
    show_apps: bool = True
    app_permissions: Permissions | None = None


class McpServerUpdate(Body):
    name: Name | None = None
    url: Url | None = None
    headers: dict[str, str] | None = None
    bearer_token: Annotated[str, Field(max_length=4096)] | None = None
    enabled: bool | None = None
    connect_timeout: Seconds | None = None
    call_timeout: Seconds | None = None
    allowed_tools: ToolNames | None = None
    ask_first_tools: ToolNames | None = None
    show_apps: bool | None = None
    workspace_tool: ToolName | None = None
    app_permissions: Permissions | None = None


def _tools(request: Request, row: McpServerRecord) -> tuple[KnownTool, ...]:
    """The server's tools as its session lists them here, else as it last listed them."""
    turns = getattr(request.app.state, "turns", None)
    listed = turns.mcp.listed(row.id) if turns is not None and row.enabled else None
    return listed if listed is not None else stored_tools(row.known_tools)


def _view(request: Request, row: McpServerRecord) -> dict[str, Any]:
    turns = getattr(request.app.state, "turns", None)
    health = turns.mcp.status(row.id) if turns is not None and row.enabled else None
    return mcp_server_view(row, health, _tools(request, row))


def _audited(row: McpServerRecord, fields: dict[str, Any]) -> dict[str, Any]:
    """What the audit trail keeps of a change (USE-5): the fields set, secrets only named."""
    secret = {"headers", "bearer_token"}
    return {
        "name": row.name,
        **{k: ("changed" if k in secret else v) for k, v in fields.items() if k != "name"},
    }


def _changed(request: Request, session: Session) -> None:
    """Commits, then lets the turn service bring its sessions in line (in the background)."""
    session.commit()
    turns = getattr(request.app.state, "turns", None)
    if turns is not None:
        anyio.from_thread.run_sync(turns.sync_mcp_servers)


@router.get("")
def list_servers(request: Request, _: AdminUser, session: DbSession) -> dict[str, Any]:
    return {"items": [_view(request, s) for s in store.list_servers(session)]}


@router.get("/{server_id}")
def get_server(
    server_id: str, request: Request, _: AdminUser, session: DbSession
) -> dict[str, Any]:
    return _view(request, store.get_server(session, server_id))


@router.post("", status_code=201)
def create_server(
    body: McpServerCreate,
    request: Request,
    user: AdminUser,
    session: DbSession,
    secrets: SecretsDep,
    policy: EndpointPolicyDep,
) -> dict[str, Any]:
    fields = body.model_dump(exclude_unset=True)
    row = repo.save_server(session, secrets, policy, fields)
    audit.record(session, user, "add_mcp_server", "mcp_server", row.id, _audited(row, fields))
    _changed(request, session)
    return _view(request, row)


@router.patch("/{server_id}")
def change_server(
    server_id: str,
    body: McpServerUpdate,
    request: Request,
    user: AdminUser,
    session: DbSession,
    secrets: SecretsDep,
    policy: EndpointPolicyDep,
) -> dict[str, Any]:
    row = store.get_server(session, server_id)
    fields = body.model_dump(exclude_unset=True)
    app_tools = {tool.name for tool in _tools(request, row) if tool.app is not None}
    row = repo.save_server(session, secrets, policy, fields, row, app_tools=app_tools)
    audit.record(session, user, "update_mcp_server", "mcp_server", row.id, _audited(row, fields))
    _changed(request, session)
    return _view(request, row)


@router.delete("/{server_id}", status_code=204)
def delete_server(
    server_id: str, request: Request, user: AdminUser, session: DbSession
) -> Response:
    row = store.get_server(session, server_id)
    audit.record(session, user, "delete_mcp_server", "mcp_server", row.id, {"name": row.name})
    store.delete_server(session, row.id)
    _changed(request, session)
    return Response(status_code=204)
