"""MCP servers configured by an administrator (TURN-4), with encrypted headers.

The URL obeys the same endpoint policy as model URLs (PROF-4).  Headers — typically
``Authorization: Bearer …`` — are one JSON object encrypted like API keys, bound to the row
(``mcp_server:<id>``), and never returned by the API (``has_headers`` only).  The turn service
calls :func:`connection` when it (re)connects a server's link.

Each server also has its own connect and call timeouts (PROV-3; NULL: the settings), an
allow-list of the tools offered (NULL: all) and the tools the user approves first (PROV-6).
MCP Apps (APPS-1, APPS-2, APPS-4): whether its tools show their apps (``show_apps``), the one
tool "Open Live Workspace" calls (``workspace_tool``: a tool of the server that has an app,
else ``invalid_input``) and the browser permissions its apps may be granted
(``app_permissions``).
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from chatmem.errors import InvalidInput
from chatmem.security.endpoints import EndpointPolicy
from chatmem.security.secret_box import SecretBox, mcp_server_aad
from chatmem.store import mcp_servers as store
from chatmem.store.mcp_servers import McpServerRecord
from chatmem.store.sessions import Session
from chatmem.store.types import new_id


@dataclass(frozen=True)
class McpConnection:
    id: str
    name: str
    url: str
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)


def _headers(fields: Mapping[str, Any]) -> dict[str, str] | None:
    headers = dict(fields.get("headers") or {})
    token = fields.get("bearer_token")
    if token:
        headers["Authorization"] = f"Bearer {token}"
    for name, value in headers.items():
        if not isinstance(name, str) or not isinstance(value, str) or "\n" in name + value:
            raise InvalidInput("headers: names and values must be single-line strings")
    return headers or None


def save_server(
    session: Session,
    secrets: SecretBox,
    policy: EndpointPolicy,
    fields: Mapping[str, Any],
    row: McpServerRecord | None = None,
    *,
    app_tools: Collection[str] = (),
) -> McpServerRecord:
    """Create (``row`` None) or change a server.  ``headers``/``bearer_token`` replace the
    stored headers when present; ``headers: null`` clears them.  ``app_tools``: the names
    of the server's tools that have an app, the only ones ``workspace_tool`` may name.
    Every field is checked before anything is stored."""
    creating = row is None
    if creating and (not fields.get("name") or not fields.get("url")):
        raise InvalidInput("name and url are required")
    server_id = new_id() if row is None else row.id
    values: dict[str, Any] = {}
    if "name" in fields and fields["name"] is not None:
        values["name"] = str(fields["name"]).strip()
        if not values["name"]:
            raise InvalidInput("name: must not be empty")
    if "url" in fields and fields["url"] is not None:
        policy.check_url(str(fields["url"]))
        values["url"] = str(fields["url"])
    if "enabled" in fields and fields["enabled"] is not None:
        values["enabled"] = bool(fields["enabled"])
    for name, (low, high) in TIMEOUTS.items():
        if name in fields:
            values[name] = _timeout(name, fields[name], low, high)
    for name in ("allowed_tools", "ask_first_tools"):
        if name in fields:
            values[name] = _tool_names(name, fields[name])
    values.update(_app_fields(fields, app_tools))
    if "headers" in fields or "bearer_token" in fields:
        headers = _headers(fields)
        values["headers_ciphertext"] = (
            secrets.encrypt(json.dumps(headers), mcp_server_aad(server_id)) if headers else None
        )
    return store.save_server(session, server_id, values, creating=creating)


#: The browser permissions an administrator may allow a server's apps (APPS-2).
APP_PERMISSIONS = ("camera", "microphone", "geolocation", "clipboard_write")


def _app_fields(fields: Mapping[str, Any], app_tools: Collection[str]) -> dict[str, Any]:
    values: dict[str, Any] = {}
    if fields.get("show_apps") is not None:
        values["show_apps"] = bool(fields["show_apps"])
    if "workspace_tool" in fields:
        tool = fields["workspace_tool"]
        if tool is not None and tool not in app_tools:
            raise InvalidInput(
                "workspace_tool: name a tool of this server that has an app, or null"
            )
        values["workspace_tool"] = tool
    if "app_permissions" in fields:
        asked = fields["app_permissions"]
        if asked is not None and (
            not isinstance(asked, list | tuple) or not set(asked) <= set(APP_PERMISSIONS)
        ):
            raise InvalidInput(f"app_permissions: a list of {', '.join(APP_PERMISSIONS)}")
        values["app_permissions"] = sorted(set(asked)) if asked else None
    return values


#: Allowed seconds for the per-server timeouts (PROV-3).
TIMEOUTS = {"connect_timeout": (0.1, 600.0), "call_timeout": (0.1, 86_400.0)}
MAX_TOOL_NAMES = 1000


def _timeout(name: str, value: Any, low: float, high: float) -> float | None:
    if value is None:
        return None  # the setting's default
    if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= high:
        raise InvalidInput(f"{name}: seconds from {low:g} to {high:g}, or null for the default")
    return float(value)


def _tool_names(name: str, value: Any) -> list[str] | None:
    if value is None:
        return None
    if (
        not isinstance(value, list | tuple)
        or len(value) > MAX_TOOL_NAMES
        or not all(isinstance(v, str) and 0 < len(v) <= 300 for v in value)
    ):
        raise InvalidInput(f"{name}: a list of tool names, or null")
    return sorted(set(value))


def decrypt_headers(row: McpServerRecord, secrets: SecretBox) -> dict[str, str]:
    text = secrets.decrypt_optional(row.headers_ciphertext, mcp_server_aad(row.id))
    return dict(json.loads(text)) if text else {}


def connection(row: McpServerRecord, secrets: SecretBox) -> McpConnection:
    """What an MCP client needs: the URL and the decrypted headers."""
    return McpConnection(row.id, row.name, row.url, decrypt_headers(row, secrets))
