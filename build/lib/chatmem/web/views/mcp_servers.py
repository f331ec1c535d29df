"""What administrators see of an MCP server (TURN-4, PROV-3): never its headers."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from chatmem.store.mcp_servers import McpServerRecord
from chatmem.store.types import iso
from chatmem.tools.toolbox import KnownTool

#: The health of a server this process has no session for (yet).
NO_HEALTH: dict[str, Any] = {
    "state": "not_connected",
    "last_error": None,
    "last_error_at": None,
    "last_success_at": None,
    "tool_count": None,
    "tools": [],
}


def tool_view(tool: KnownTool) -> dict[str, Any]:
    """A tool as administrators see it, with its app (APPS-1: its ``ui://`` resource and who
    may call it; null when it has none)."""
    return {
        "name": tool.name,
        "description": tool.description,
        "app": tool.app.to_json() if tool.app is not None else None,
    }


def mcp_server_view(
    row: McpServerRecord,
    health: Mapping[str, Any] | None = None,
    tools: Sequence[KnownTool] = (),
) -> dict[str, Any]:
    """What administrators see: never the headers.  ``health`` is this process's view of the
    server's session (PROV-3): state, last error and when, last success, the tools listed;
    ``tools`` the tools it lists (or last listed), each with its app (APPS-1)."""
    if health is None:
        health = {**NO_HEALTH, "state": "not_connected" if row.enabled else "disabled"}
    return {
        "id": row.id,
        "name": row.name,
        "url": row.url,
        "enabled": row.enabled,
        "has_headers": row.headers_ciphertext is not None,
        "connect_timeout": row.connect_timeout,
        "call_timeout": row.call_timeout,
        "allowed_tools": row.allowed_tools,
        "ask_first_tools": row.ask_first_tools or [],
        "health": dict(health),
        "created_at": iso(row.created_at),
        "show_apps": row.show_apps,
        "workspace_tool": row.workspace_tool,
        "app_permissions": row.app_permissions or [],
        "tools": [tool_view(tool) for tool in tools],
    }
