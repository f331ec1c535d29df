"""MCP servers configured by an administrator (TURN-4), with encrypted headers.

The URL obeys the same endpoint policy as model URLs (PROF-4).  Headers — typically
``Authorization: Bearer …`` — are one JSON object encrypted like API keys, bound to the row
(``mcp_server:<id>``), and never returned by the API (``has_headers`` only).  The turn runner
calls :func:`connection` right before connecting and uses
:func:`chatmem.models.ssrf.safe_async_client` for the HTTP transport.
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
from chatmem.models.secrets import SecretBox, mcp_server_aad
from chatmem.models.ssrf import EndpointPolicy
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


def delete_server(session: Session, row: McpServer) -> None:
    session.delete(row)
    session.flush()


def decrypt_headers(row: McpServer, secrets: SecretBox) -> dict[str, str]:
    text = secrets.decrypt_optional(row.headers_ciphertext, mcp_server_aad(row.id))
    return dict(json.loads(text)) if text else {}


def connection(row: McpServer, secrets: SecretBox) -> McpConnection:
    """What an MCP client needs: the URL and the decrypted headers."""
    return McpConnection(row.id, row.name, row.url, decrypt_headers(row, secrets))


def public_view(row: McpServer) -> dict[str, Any]:
    return {
        "id": row.id,
        "name": row.name,
        "url": row.url,
        "enabled": row.enabled,
        "has_headers": row.headers_ciphertext is not None,
        "created_at": iso(row.created_at),
    }
