"""MCP servers as stored (TURN-4): one frozen :class:`McpServerRecord` for every reader.

The checks and the encryption of a server's headers belong to :mod:`chatmem.models.
mcp_servers`; these functions store what it hands over and never commit (the caller's unit
of work does).  Names are unique: a second server with a name answers :class:`~chatmem.
errors.Conflict`, the database unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError

from chatmem.errors import Conflict, NotFound
from chatmem.security.secret_box import SecretBox, mcp_server_aad
from chatmem.store.db import connection_of
from chatmem.store.sessions import Handle, Session
from chatmem.store.tables.profiles import McpServer


@dataclass(frozen=True, slots=True)
class McpServerRecord:
    """An MCP server as stored (every column of ``mcp_servers``)."""

    id: str
    name: str
    url: str
    headers_ciphertext: bytes | None
    enabled: bool
    #: PROV-3: seconds (None: the settings).
    connect_timeout: float | None
    call_timeout: float | None
    #: PROV-6: the tools offered (None: all) and those the user approves first.
    allowed_tools: list[str] | None
    ask_first_tools: list[str] | None
    #: The tools the server last listed (``chatmem.tools.known``), None: never listed.
    known_tools: list[dict[str, object]] | None
    tools_listed_at: datetime | None
    created_at: datetime
    #: APPS-1: its tools show their apps; APPS-4: its workspace tool; APPS-2: the
    #: permissions its apps may be granted.
    show_apps: bool
    workspace_tool: str | None
    app_permissions: list[str] | None


_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(McpServerRecord))
if set(_FIELDS) != {c.name for c in McpServer.__table__.c}:  # pragma: no cover
    raise RuntimeError("McpServerRecord must have exactly the columns of McpServer")
_COLUMNS: tuple[Any, ...] = tuple(getattr(McpServer, name) for name in _FIELDS)

# Read at every turn: built once, run on the Core connection.
_ENABLED = select(*_COLUMNS).where(McpServer.enabled.is_(True)).order_by(McpServer.name)


def _record(row: McpServer) -> McpServerRecord:
    return McpServerRecord(*(getattr(row, name) for name in _FIELDS))


def list_servers(session: Session, *, enabled_only: bool = False) -> list[McpServerRecord]:
    """Every server (or the enabled ones), by name."""
    query = select(*_COLUMNS).order_by(McpServer.name)
    if enabled_only:
        query = query.where(McpServer.enabled.is_(True))
    return [McpServerRecord(*row) for row in session.execute(query)]


def enabled_servers(db: Handle) -> list[McpServerRecord]:
    """The enabled servers, by name (read at every turn)."""
    return [McpServerRecord(*row) for row in connection_of(db).execute(_ENABLED)]


def get_server(session: Session, server_id: str) -> McpServerRecord:
    """The server, or :class:`NotFound`."""
    row = session.get(McpServer, server_id)
    if row is None:
        raise NotFound("MCP server")
    return _record(row)


def save_server(
    session: Session, server_id: str, values: Mapping[str, Any], *, creating: bool
) -> McpServerRecord:
    """Store a new server (``creating``: enabled unless ``values`` say otherwise) or change
    the columns named in ``values``.  A name another server has is :class:`Conflict`."""
    if creating:
        row = McpServer(id=server_id, enabled=True)
        session.add(row)
    else:
        found = session.get(McpServer, server_id)
        if found is None:
            raise NotFound("MCP server")
        row = found
    for name, value in values.items():
        setattr(row, name, value)
    try:
        with session.begin_nested():
            session.flush()
    except IntegrityError:
        raise Conflict("An MCP server with this name already exists.") from None
    return _record(row)


def delete_server(session: Session, server_id: str) -> None:
    row = session.get(McpServer, server_id)
    if row is not None:
        session.delete(row)
        session.flush()


def reencrypt_headers(session: Session, old: SecretBox, new: SecretBox) -> int:
    """PROF-3: every stored header set decrypted with ``old`` and encrypted with ``new`` (in
    the caller's one transaction); how many."""
    count = 0
    for row in session.scalars(select(McpServer).where(McpServer.headers_ciphertext.is_not(None))):
        aad = mcp_server_aad(row.id)
        assert row.headers_ciphertext is not None
        row.headers_ciphertext = new.encrypt(old.decrypt(row.headers_ciphertext, aad), aad)
        count += 1
    return count
