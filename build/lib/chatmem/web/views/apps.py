"""The JSON of MCP Apps (APPS-1 … APPS-4): where a call's app is, what an app is given."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from chatmem.store.tool_calls import CallApp
from chatmem.tools.app_host import AppView


def tool_calls_public(
    message_id: str,
    calls: Sequence[Mapping[str, Any]],
    apps: Mapping[tuple[str | None, str], CallApp],
) -> list[dict[str, Any]]:
    """An assistant message's tool calls, each with its record (``tool_call_id``: None for a
    call chatmem did not make — a client's own tool) and its app (APPS-1: ``{"resource_uri"}``,
    None when the tool has none or its server shows no apps)."""
    out: list[dict[str, Any]] = []
    for call in calls:
        found = apps.get((message_id, str(call.get("id"))))
        app = {"resource_uri": found.app_uri} if found is not None and found.app_uri else None
        out.append({**call, "tool_call_id": found.id if found is not None else None, "app": app})
    return out


def app_public(view: AppView) -> dict[str, Any]:
    """``GET /api/v1/tool-calls/{id}/app`` (APPS-1, APPS-2): what the feed renders a call's
    app from — the HTML chatmem's server fetched (or null), the CSP domains and the
    permissions (asked for by the resource *and* allowed by the administrator) the sandbox
    is built with, the call's input and whole result as stored, and whether the app can talk
    to its server now (``available``; else ``note`` says why and the stored text is shown)."""
    call = view.call
    return {
        "tool_call_id": call.id,
        "conversation_id": call.conversation_id,
        "server_id": call.server_id,
        "server_name": call.server_name,
        "tool": call.tool,
        "resource_uri": call.app_uri,
        "html": view.html,
        "csp": view.ui.csp_json(),
        "permissions": view.ui.granted(call.app_permissions),
        "prefers_border": view.ui.prefers_border,
        "input": view.arguments,
        "result": call.result_json,
        "status": call.status,
        "text": call.result or "",
        "available": view.available,
        "note": view.note,
    }
