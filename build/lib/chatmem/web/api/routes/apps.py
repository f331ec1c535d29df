"""MCP Apps (APPS-1 … APPS-4): what the feed renders a tool call's app from, and what an app
asks of its server — always through chatmem's server, never from the browser to an MCP
server.  Every route answers the owner of the call's conversation only (``not_found``
otherwise, STORE-1)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Request, Response
from pydantic import Field

from chatmem.store import apps as store
from chatmem.store.conversations import owned_conversation_row
from chatmem.tools.app_host import AppHost
from chatmem.web.api.routes.turns import UserId
from chatmem.web.api.schemas import Body
from chatmem.web.deps import CurrentUser, DbSession
from chatmem.web.errors import MCP_RESPONSES
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


class AppToolCall(Body):
    name: Annotated[str, Field(min_length=1, max_length=300)]
    arguments: dict[str, Any] = Field(default_factory=dict)
    #: The user approved this "ask first" call on the page (PROV-6).
    approved: bool = False


class AppResourceRead(Body):
    uri: Annotated[str, Field(min_length=1, max_length=1000)]


@router.post("/tool-calls/{tool_call_id}/app/tools-call")
async def app_tools_call(
    tool_call_id: str, body: AppToolCall, request: Request, user_id: UserId
) -> dict[str, Any]:
    """APPS-3: the app's ``tools/call`` — a tool of its own server only, under the model's
    rules: not allowed by the administrator (or not callable by apps) is ``forbidden``; an
    "ask first" tool is ``approval_required`` until sent with ``approved: true`` (the page
    asked the user); recorded as called by the app for this user; at most
    ``CHATMEM_APP_CALLS_PER_MINUTE`` a minute per conversation (``rate_limited``).  Answers
    the ``CallToolResult`` (an error result when the server did not answer)."""
    return await app_host(request).call_tool(
        user_id, tool_call_id, body.name, body.arguments, approved=body.approved
    )


@router.post("/tool-calls/{tool_call_id}/app/resources-read", responses=MCP_RESPONSES)
async def app_resources_read(
    tool_call_id: str, body: AppResourceRead, request: Request, user_id: UserId
) -> dict[str, Any]:
    """APPS-3: the app's ``resources/read``, from its own server (a server no longer enabled
    is ``forbidden``; one that is down, ``mcp_unavailable``).  Answers the
    ``ReadResourceResult`` (``{"contents": […]}``)."""
    return await app_host(request).read_resource(user_id, tool_call_id, body.uri)


class WorkspaceChoice(Body):
    tool_call_id: Annotated[str, Field(min_length=1, max_length=64)]


class WorkspaceOpen(Body):
    server_id: Annotated[str, Field(min_length=1, max_length=64)]
    #: The user approved the workspace tool when it is an "ask first" one (PROV-6).
    approved: bool = False


@router.get("/apps/workspaces")
async def list_workspaces(request: Request, user_id: UserId) -> list[dict[str, Any]]:
    """APPS-4: the workspace tools one may open ("Open Live Workspace"): each enabled server
    that shows apps and names an allowed workspace tool, as ``{"server_id", "server_name",
    "tool"}``."""
    return list(await app_host(request).workspaces())


@router.put("/conversations/{conversation_id}/workspace")
def open_in_workspace(
    conversation_id: str, body: WorkspaceChoice, user: CurrentUser, session: DbSession
) -> dict[str, Any]:
    """APPS-4: keeps the app of this conversation's call ``tool_call_id`` open in the Live
    Workspace (across turns and reloads); a call of another conversation, or without an
    app, is ``not_found``."""
    owned_conversation_row(session, user.id, conversation_id)
    store.app_call_in(session, conversation_id, body.tool_call_id)
    store.set_workspace(session, conversation_id, body.tool_call_id)
    return {"tool_call_id": body.tool_call_id}


@router.delete("/conversations/{conversation_id}/workspace", status_code=204)
def close_workspace(conversation_id: str, user: CurrentUser, session: DbSession) -> Response:
    """APPS-4: closes the conversation's Live Workspace."""
    owned_conversation_row(session, user.id, conversation_id)
    store.set_workspace(session, conversation_id, None)
    return Response(status_code=204)


@router.post("/conversations/{conversation_id}/workspace/open", responses=MCP_RESPONSES)
async def open_workspace(
    conversation_id: str, body: WorkspaceOpen, request: Request, user_id: UserId
) -> dict[str, Any]:
    """APPS-4 "Open Live Workspace": calls the server's workspace tool for the user (recorded
    as called by the app; no model turn), keeps the call in the conversation and opens its
    app in the workspace; answers ``{"tool_call_id"}`` (``not_found`` when the server names
    no workspace tool)."""
    tool_call_id = await app_host(request).open_workspace(
        user_id, conversation_id, body.server_id, approved=body.approved
    )
    return {"tool_call_id": tool_call_id}
