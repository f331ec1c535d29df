"""Tool calls as recorded (TURN-3, PROV-6): each call written before it is made, its end, and
the user's answer to an "ask first" call.

A call is recorded ``started`` (or ``waiting`` for an "ask first" tool) before it is made, so
a crash leaves evidence; its end writes the status and the result.  The user's decision is
taken by one conditional update: only a row still ``waiting`` with no decision takes one, so
two clicks, two tabs or two replicas agree on a single answer.  Rows are read as
:class:`ToolCallRecord` (frozen copies, not ORM objects).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, fields
from datetime import datetime
from typing import Any

from sqlalchemy import and_, bindparam, insert, or_, select, update
from sqlalchemy.orm import Session

from chatmem.errors import Conflict, NotFound
from chatmem.store.runs import RunRecord, owned_run
from chatmem.store.tables.accounts import User
from chatmem.store.tables.profiles import McpServer
from chatmem.store.tables.runs import TOOL_CALLERS, TOOL_DECISIONS, TOOL_STATUSES, ToolCallRow
from chatmem.store.types import new_id, utcnow


@dataclass(frozen=True, slots=True)
class ToolCallRecord:
    """One recorded tool call (``tool_calls``), read once; ``arguments`` and ``result`` are
    not read back (the arguments may hold a user's data: their digest is kept)."""

    id: str
    run_id: str | None
    conversation_id: str
    call_id: str
    name: str
    arguments_sha256: str | None
    message_id: str | None
    server_id: str | None
    server_name: str | None
    tool: str | None
    user_id: str | None
    status: str
    decision: str | None
    decided_by: str | None
    decided_at: datetime | None
    started_at: datetime
    finished_at: datetime | None
    duration_ms: int | None
    #: APPS-3: ``model`` (a turn's call) or ``app`` (an app's, outside any run).
    caller: str
    #: APPS-1: the ``ui://`` resource of the tool's app when it was called, or None.
    app_uri: str | None


@dataclass(frozen=True, slots=True)
class ToolCallEntry:
    """A call in the administrators' list, with its user's name (None once deleted)."""

    call: ToolCallRecord
    user_name: str | None


def _tool_call_record(row: ToolCallRow) -> ToolCallRecord:
    return ToolCallRecord(*(getattr(row, f.name) for f in fields(ToolCallRecord)))


# Built once: every tool call of every turn writes one (TURN-3).
_INSERT_TOOL_CALL = insert(ToolCallRow)


def tool_started(
    session: Session,
    *,
    run_id: str | None,
    conversation_id: str,
    call_id: str,
    name: str,
    arguments: str,
    message_id: str | None,
    server_id: str | None,
    user_id: str | None = None,
    server_name: str | None = None,
    tool: str | None = None,
    status: str = "started",
    row_id: str | None = None,
    caller: str = "model",
    app_uri: str | None = None,
    decided_by: str | None = None,
) -> str:
    """Record a tool call *before* it is made, so a crash leaves evidence (TURN-3); an "ask
    first" call is recorded ``waiting`` (PROV-6).  The arguments are kept with their SHA-256
    digest, which the administrators' list shows.  ``row_id``: the id to record it under
    (new when None); ``caller`` ``app`` for an app's call (APPS-3: no run), ``app_uri`` the
    tool's app (APPS-1), ``decided_by`` the user who approved an app's "ask first" call."""
    assert status in ("started", "waiting") and caller in TOOL_CALLERS
    row_id = row_id or new_id()
    now = utcnow()
    session.connection().execute(
        _INSERT_TOOL_CALL,
        {
            "id": row_id,
            "run_id": run_id,
            "conversation_id": conversation_id,
            "call_id": call_id,
            "name": name,
            "arguments": arguments,
            "arguments_sha256": hashlib.sha256(arguments.encode("utf-8")).hexdigest(),
            "message_id": message_id,
            "server_id": server_id,
            "server_name": server_name,
            "tool": tool,
            "user_id": user_id,
            "status": status,
            "started_at": now,
            "caller": caller,
            "app_uri": app_uri,
            "decision": "approved" if decided_by else None,
            "decided_by": decided_by,
            "decided_at": now if decided_by else None,
        },
    )
    return row_id


def tool_finished(
    session: Session,
    row_id: str,
    status: str,
    result: str,
    duration_ms: int | None = None,
    result_json: dict[str, Any] | None = None,
) -> None:
    """The call's end: its status, the text result the model saw and (APPS-1) the whole
    result as the server returned it, when it is kept."""
    assert status in TOOL_STATUSES
    session.execute(
        update(ToolCallRow)
        .where(ToolCallRow.id == row_id)
        .values(
            status=status,
            result=result,
            finished_at=utcnow(),
            duration_ms=duration_ms,
            result_json=result_json,
        )
    )


def tool_approved(session: Session, row_id: str) -> None:
    """An "ask first" call the user approved is about to be made."""
    session.execute(update(ToolCallRow).where(ToolCallRow.id == row_id).values(status="started"))


def record_decision(
    session: Session, user_id: str, run_id: str, call_id: str, decision: str
) -> RunRecord:
    """PROV-6: writes the user's answer on the latest call ``call_id`` of their run, by one
    conditional update (only a row still ``waiting`` with no decision takes one); returns the
    run.  Repeating the same answer is harmless; a different or late one is a ``Conflict``."""
    assert decision in TOOL_DECISIONS
    run = owned_run(session, user_id, run_id)
    row = session.execute(
        select(ToolCallRow.id)
        .where(ToolCallRow.run_id == run_id, ToolCallRow.call_id == call_id)
        .order_by(ToolCallRow.started_at.desc())
        .limit(1)
    ).first()
    if row is None:
        raise NotFound("tool call")
    claim = (
        update(ToolCallRow)
        .where(
            ToolCallRow.id == row.id,
            ToolCallRow.status == "waiting",
            ToolCallRow.decision.is_(None),
        )
        .values(decision=decision, decided_by=user_id, decided_at=utcnow())
    )
    taken = session.connection().execute(claim).rowcount
    if not taken and tool_decision(session, row.id) != decision:
        raise Conflict("This tool call is not waiting for an answer any more.")
    return run


def tool_decision(session: Session, row_id: str) -> str | None:
    """The decision on a recorded call (``approved``, ``refused``, ``expired``), or None."""
    return session.scalar(select(ToolCallRow.decision).where(ToolCallRow.id == row_id))


def expire_decision(session: Session, row_id: str) -> str | None:
    """No answer in time: ``expired``, unless an answer landed just now (then that one)."""
    session.execute(
        update(ToolCallRow)
        .where(ToolCallRow.id == row_id, ToolCallRow.decision.is_(None))
        .values(decision="expired", decided_at=utcnow())
    )
    return tool_decision(session, row_id)


def tool_call_page(
    session: Session,
    *,
    limit: int = 100,
    before: str | None = None,
    user_id: str | None = None,
    server_id: str | None = None,
) -> tuple[list[ToolCallEntry], str | None]:
    """The administrators' list (PROV-6): newest first, ``limit`` rows after the cursor
    ``before`` (a row id from the previous page); returns the rows and the next cursor."""
    query = select(ToolCallRow, User.name).outerjoin(User, User.id == ToolCallRow.user_id)
    if user_id is not None:
        query = query.where(ToolCallRow.user_id == user_id)
    if server_id is not None:
        query = query.where(ToolCallRow.server_id == server_id)
    if before is not None:
        anchor = session.get(ToolCallRow, before)
        if anchor is not None:
            query = query.where(
                or_(
                    ToolCallRow.started_at < anchor.started_at,
                    and_(ToolCallRow.started_at == anchor.started_at, ToolCallRow.id < anchor.id),
                )
            )
    rows = session.execute(
        query.order_by(ToolCallRow.started_at.desc(), ToolCallRow.id.desc()).limit(limit + 1)
    ).all()
    items = [ToolCallEntry(_tool_call_record(row), name) for row, name in rows[:limit]]
    return items, (items[-1].call.id if len(rows) > limit else None)


def open_tool_calls(session: Session, run_id: str) -> list[ToolCallRecord]:
    """The run's calls recorded ``started`` or ``waiting`` that have not ended (TURN-3)."""
    rows = session.scalars(
        select(ToolCallRow).where(
            ToolCallRow.run_id == run_id, ToolCallRow.status.in_(("started", "waiting"))
        )
    ).all()
    return [_tool_call_record(row) for row in rows]


@dataclass(frozen=True, slots=True)
class CallApp:
    """A recorded call of a conversation as its feed places it (APPS-1): under the model's
    call ``call_id`` of the assistant message ``message_id``, with the call's app when its
    server shows apps (None otherwise)."""

    id: str
    message_id: str | None
    call_id: str
    app_uri: str | None


_CALL_APPS = (
    select(
        ToolCallRow.id,
        ToolCallRow.message_id,
        ToolCallRow.call_id,
        ToolCallRow.app_uri,
        McpServer.show_apps,
    )
    .outerjoin(McpServer, McpServer.id == ToolCallRow.server_id)
    .where(ToolCallRow.conversation_id == bindparam("cid"), ToolCallRow.caller == "model")
    .order_by(ToolCallRow.started_at)
)


def call_apps(session: Session, conversation_id: str) -> dict[tuple[str | None, str], CallApp]:
    """The model's recorded calls of a conversation by (assistant message, call id); a call
    made again later (a retried id) is the later one.  A server that was removed shows the
    apps its calls had."""
    found: dict[tuple[str | None, str], CallApp] = {}
    for row in session.execute(_CALL_APPS, {"cid": conversation_id}):
        app_uri = row.app_uri if row.show_apps is not False else None
        found[(row.message_id, row.call_id)] = CallApp(row.id, row.message_id, row.call_id, app_uri)
    return found
