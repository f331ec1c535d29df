"""MCP Apps (APPS-1, APPS-4): the apps' HTML as chatmem's server fetched it, and the app
each conversation keeps open in its Live Workspace (``app_workspaces``).

``app_resources`` — one row per (server, ``ui://`` URI): the HTML of the app resource as the
server last gave it, for the server version it gave then (a new version is fetched again),
what the resource declares (``ui``: CSP domains, permissions, border) and its size.  A
resource larger than the bound (or not an app) is remembered with ``html`` NULL and the
``problem`` (it is not fetched again for that version).  The browser never talks to an MCP server: this is what it is shown,
also while the server is down.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, ForeignKey, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from chatmem.store.base import Base
from chatmem.store.types import UTCDateTime, utcnow


class AppResource(Base):
    __tablename__ = "app_resources"

    server_id: Mapped[str] = mapped_column(
        ForeignKey("mcp_servers.id", ondelete="CASCADE"), primary_key=True
    )
    uri: Mapped[str] = mapped_column(String(1000), primary_key=True)
    #: The server's version when it was fetched (NULL: the server gave none).
    server_version: Mapped[str | None] = mapped_column(String(200), nullable=True)
    html: Mapped[str | None] = mapped_column(Text, nullable=True)
    ui: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    size: Mapped[int] = mapped_column(Integer, default=0)
    #: Why ``html`` is NULL (too large, not an app …), for the note the feed shows.
    problem: Mapped[str | None] = mapped_column(String(300), nullable=True)
    fetched_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class AppWorkspace(Base):
    """APPS-4: the one app a conversation keeps open beside it, the Live Workspace (a row:
    open; none: closed) — a recorded tool call of the conversation that has an app."""

    __tablename__ = "app_workspaces"

    conversation_id: Mapped[str] = mapped_column(
        ForeignKey("conversations.id", ondelete="CASCADE"), primary_key=True
    )
    tool_call_id: Mapped[str] = mapped_column(String(32))
    opened_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
