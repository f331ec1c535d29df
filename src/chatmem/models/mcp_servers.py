"""MCP servers configured by an administrator (TURN-4), with encrypted headers.

The URL obeys the same endpoint policy as model URLs (PROF-4).  Headers — typically
``Authorization: Bearer …`` — are one JSON object encrypted like API keys, bound to the row
(``mcp_server:<id>``), and never returned by the API (``has_headers`` only).  The turn service
calls :func:`connection` when it (re)connects a server's link.

Each server also has its own connect and call timeouts (PROV-3; NULL: the settings), an
allow-list of the tools offered (NULL: all) and the tools the user approves first (PROV-6).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Connection, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from chatmem.errors import Conflict, InvalidInput, NotFound
from chatmem.security.endpoints import EndpointPolicy
from chatmem.security.secret_box import SecretBox, mcp_server_aad
from chatmem.store.db import connection_of
from chatmem.store.tables.profiles import McpServer
from chatmem.store.types import iso, new_id


@dataclass(frozen=True)
class McpConnection:
    id: str
    name: str
    url: str
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)


def list_servers(session: Session, *, enabled_only: bool = False) -> list[McpServer]:
    query = select(McpServer).order_by(McpServer.name)
    if enabled_only:
        query = query.where(McpServer.enabled.is_(True))
    return list(session.scalars(query))


# Read at every turn: built once, and read as Core rows (attribute access like the ORM rows).
_ENABLED = select(McpServer.__table__).where(McpServer.enabled.is_(True)).order_by(McpServer.name)


def enabled_rows(session: Session | Connection) -> list[Any]:
    """The enabled servers' stored columns, for :func:`connection` at every turn."""
    return list(connection_of(session).execute(_ENABLED))


def get_server(session: Session, server_id: str) -> McpServer:
    row = session.get(McpServer, server_id)
    if row is None:
        raise NotFound("MCP server")
    return row


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
    row: McpServer | None = None,
) -> McpServer:
    """Create (``row`` None) or change a server.  ``headers``/``bearer_token`` replace the
    stored headers when present; ``headers: null`` clears them."""
    creating = row is None
    if row is None:
        if not fields.get("name") or not fields.get("url"):
            raise InvalidInput("name and url are required")
        row = McpServer(id=new_id(), enabled=True)
    if "name" in fields and fields["name"] is not None:
        row.name = str(fields["name"]).strip()
        if not row.name:
            raise InvalidInput("name: must not be empty")
    if "url" in fields and fields["url"] is not None:
        policy.check_url(str(fields["url"]))
        row.url = str(fields["url"])
    if "enabled" in fields and fields["enabled"] is not None:
        row.enabled = bool(fields["enabled"])
    for name, (low, high) in TIMEOUTS.items():
        if name in fields:
            setattr(row, name, _timeout(name, fields[name], low, high))
    for name in ("allowed_tools", "ask_first_tools"):
        if name in fields:
            setattr(row, name, _tool_names(name, fields[name]))
    if "headers" in fields or "bearer_token" in fields:
        headers = _headers(fields)
        row.headers_ciphertext = (
            secrets.encrypt(json.dumps(headers), mcp_server_aad(row.id)) if headers else None
        )
    if creating:
        session.add(row)
    try:
        with session.begin_nested():
            session.flush()
    except IntegrityError:
        raise Conflict("An MCP server with this name already exists.") from None
    return row


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


def delete_server(session: Session, row: McpServer) -> None:
    session.delete(row)
    session.flush()


def decrypt_headers(row: McpServer, secrets: SecretBox) -> dict[str, str]:
    text = secrets.decrypt_optional(row.headers_ciphertext, mcp_server_aad(row.id))
    return dict(json.loads(text)) if text else {}


def connection(row: McpServer, secrets: SecretBox) -> McpConnection:
    """What an MCP client needs: the URL and the decrypted headers."""
    return McpConnection(row.id, row.name, row.url, decrypt_headers(row, secrets))


#: The health of a server this process has no session for (yet).
NO_HEALTH: dict[str, Any] = {
    "state": "not_connected",
    "last_error": None,
    "last_error_at": None,
    "last_success_at": None,
    "tool_count": None,
    "tools": [],
}


def public_view(row: McpServer, health: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """What administrators see: never the headers.  ``health`` is this process's view of the
    server's session (PROV-3): state, last error and when, last success, the tools listed."""
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
    }
