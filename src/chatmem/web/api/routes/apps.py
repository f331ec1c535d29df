"""MCP Apps (APPS-1 … APPS-4): what the feed renders a tool call's app from, and what an app
asks of its server — always through chatmem's server, never from the browser to an MCP
server.  Every route answers the owner of the call's conversation only (``not_found``
otherwise, STORE-1)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Request
from pydantic import Field

from chatmem.tools.app_host import AppHost
from chatmem.web.api.routes.turns import UserId
from chatmem.web.api.schemas import Body
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
