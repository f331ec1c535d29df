"""MCP Apps as stored (APPS-1 … APPS-4): a tool call as its app reads it, and the apps' HTML.

:func:`owned_call` reads one recorded tool call for the owner of its conversation only — a
call of somebody else's conversation (or of an archived one) is :class:`NotFound`, like a
missing one (STORE-1) — with its arguments, its text and whole results, and its server's
app settings as they are now.  :func:`cached_resource` and :func:`keep_resource` are the
HTML cache (``app_resources``): one row per server and URI, replaced when the server's
version changes.  :func:`set_workspace` and :func:`workspace_of` keep the app a conversation
has open in its Live Workspace (APPS-4).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import bindparam, delete, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from chatmem.errors import NotFound
from chatmem.store.tables.apps import AppResource, AppWorkspace
from chatmem.store.tables.conversations import Conversation
from chatmem.store.tables.profiles import McpServer
from chatmem.store.tables.runs import ToolCallRow
from chatmem.store.types import utcnow


@dataclass(frozen=True, slots=True)
class AppCall:
    """A recorded tool call as its app is given it, and its server's app settings now
    (``server_enabled`` None: the server was removed)."""

    id: str
    conversation_id: str
    server_id: str | None
    server_name: str | None
    tool: str
    arguments: str
    status: str
    result: str | None
    result_json: dict[str, Any] | None
    app_uri: str | None
    caller: str
    server_enabled: bool | None
    show_apps: bool
    app_permissions: tuple[str, ...]


_OWNED_CALL = (
    select(
        ToolCallRow.id,
        ToolCallRow.conversation_id,
        ToolCallRow.server_id,
        ToolCallRow.server_name,
        ToolCallRow.tool,
        ToolCallRow.name,
        ToolCallRow.arguments,
        ToolCallRow.status,
        ToolCallRow.result,
        ToolCallRow.result_json,
        ToolCallRow.app_uri,
        ToolCallRow.caller,
        McpServer.enabled,
        McpServer.show_apps,
        McpServer.app_permissions,
    )
    .join(Conversation, Conversation.id == ToolCallRow.conversation_id)
    .outerjoin(McpServer, McpServer.id == ToolCallRow.server_id)
    .where(
        ToolCallRow.id == bindparam("tid"),
        Conversation.user_id == bindparam("uid"),
        Conversation.archived_at.is_(None),
    )
)


def owned_call(session: Session, user_id: str, tool_call_id: str) -> AppCall:
    """The call, for the owner of its conversation only (else :class:`NotFound`)."""
    row = session.execute(_OWNED_CALL, {"tid": tool_call_id, "uid": user_id}).first()
    if row is None:
        raise NotFound("tool call")
    return AppCall(
        id=row.id,
        conversation_id=row.conversation_id,
        server_id=row.server_id,
        server_name=row.server_name,
        tool=row.tool or row.name,
        arguments=row.arguments,
        status=row.status,
        result=row.result,
        result_json=row.result_json,
        app_uri=row.app_uri,
        caller=row.caller,
        server_enabled=row.enabled,
        show_apps=row.show_apps is not False,
        app_permissions=tuple(row.app_permissions or ()),
    )


_CALL_IN = select(ToolCallRow.tool, ToolCallRow.name).where(
    ToolCallRow.id == bindparam("tid"),
    ToolCallRow.conversation_id == bindparam("cid"),
    ToolCallRow.app_uri.is_not(None),
)


def app_call_in(session: Session, conversation_id: str, tool_call_id: str) -> str:
    """APPS-3: the tool of ``conversation_id``'s call ``tool_call_id`` that has an app (its
    ``ui/message`` starts a turn there), else :class:`NotFound`.  The caller checked the
    conversation is the user's."""
    row = session.execute(_CALL_IN, {"tid": tool_call_id, "cid": conversation_id}).first()
    if row is None:
        raise NotFound("tool call")
    return str(row.tool or row.name)


@dataclass(frozen=True, slots=True)
class AppResourceRecord:
    """An app's HTML as fetched (``html`` None: not shown, ``problem`` says why)."""

    server_version: str | None
    html: str | None
    ui: dict[str, Any] | None
    size: int
    problem: str | None
    fetched_at: datetime


def cached_resource(session: Session, server_id: str, uri: str) -> AppResourceRecord | None:
    row = session.get(AppResource, (server_id, uri))
    if row is None:
        return None
    return AppResourceRecord(
        row.server_version, row.html, row.ui, row.size, row.problem, row.fetched_at
    )


def keep_resource(
    session: Session,
    server_id: str,
    uri: str,
    *,
    server_version: str | None,
    html: str | None,
    ui: dict[str, Any],
    size: int,
    problem: str | None = None,
) -> None:
    """Stores what was fetched in the place of what was (two fetches at once: either)."""
    row = session.get(AppResource, (server_id, uri))
    if row is None:
        row = AppResource(server_id=server_id, uri=uri)
        session.add(row)
    row.server_version, row.html, row.ui, row.size = server_version, html, ui, size
    row.problem = problem[:300] if problem else None
    row.fetched_at = utcnow()
    try:
        with session.begin_nested():
            session.flush()
    except IntegrityError:  # the other fetch stored the same resource first
        pass


def workspace_of(session: Session, conversation_id: str) -> str | None:
    """APPS-4: the tool call whose app the conversation keeps open (None: closed)."""
    row = session.get(AppWorkspace, conversation_id)
    return row.tool_call_id if row is not None else None


def set_workspace(session: Session, conversation_id: str, tool_call_id: str | None) -> None:
    """Opens ``tool_call_id``'s app in the conversation's workspace (None: closes it).  The
    caller checked the call is the conversation's and has an app (:func:`app_call_in`)."""
    session.execute(delete(AppWorkspace).where(AppWorkspace.conversation_id == conversation_id))
    if tool_call_id is not None:
        session.add(
            AppWorkspace(
                conversation_id=conversation_id, tool_call_id=tool_call_id, opened_at=utcnow()
            )
        )
        session.flush()
