"""The durable side of runs: rows, stored events, tool-call records and the usage ledger.

Plain synchronous functions over a SQLAlchemy ``Session`` (the runner calls them in a worker
thread, routes call them directly).  Every lookup is scoped to the owner: a foreign run id
answers exactly like a missing one (STORE-1).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, and_, bindparam, func, insert, null, or_, select, update
from sqlalchemy.orm import Session

from chatmem.errors import NotFound
from chatmem.store.db import connection_of
from chatmem.store.tables.accounts import User
from chatmem.store.tables.runs import Run, RunEventRow, ToolCallRow, UsageRow
from chatmem.store.types import iso, new_id, utcnow
from chatmem.turns.events import RunEvent

FINISHED_STATUSES = frozenset({"completed", "stopped", "interrupted", "failed"})


def owned_run(session: Session, user_id: str, run_id: str) -> Run:
    run = session.get(Run, run_id)
    if run is None or run.user_id != user_id:
        raise NotFound("run")
    return run


_RUN_OWNER = select(Run.user_id).where(Run.id == bindparam("rid"))


def run_owner_id(connection: Connection, run_id: str) -> str | None:
    """Whose run this is (None for an unknown id): one indexed read, for the events stream."""
    owner: str | None = connection.execute(_RUN_OWNER, {"rid": run_id}).scalar()
    return owner


def run_for_idempotency_key(session: Session, user_id: str, key: str) -> Run | None:
    return session.scalars(
        select(Run).where(Run.user_id == user_id, Run.idempotency_key == key)
    ).first()


def running_run(session: Session, conversation_id: str) -> Run | None:
    return session.scalars(
        select(Run)
        .where(Run.conversation_id == conversation_id, Run.status == "running")
        .order_by(Run.created_at.desc())
    ).first()


def conversation_runs(
    session: Session, conversation_id: str, *, active_only: bool = False, limit: int = 50
) -> list[Run]:
    query = select(Run).where(Run.conversation_id == conversation_id)
    if active_only:
        query = query.where(Run.status == "running")
    return list(session.scalars(query.order_by(Run.created_at.desc()).limit(limit)))


# The statements of every turn, built once (building one costs SQLAlchemy more than SQLite
# takes to run it).  Executed on the session's connection: plain Core, no ORM bookkeeping.
_INSERT_RUN = insert(Run)
_INSERT_EVENT = insert(RunEventRow)
_INSERT_USAGE = insert(UsageRow)
_SET_LAST_SEQ = update(Run).where(Run.id == bindparam("rid")).values(last_seq=bindparam("new_seq"))
_ADD_RUN_USAGE = (
    update(Run)
    .where(Run.id == bindparam("rid"))
    .values(
        prompt_tokens=Run.prompt_tokens + bindparam("prompt"),
        completion_tokens=Run.completion_tokens + bindparam("completion"),
        cost=Run.cost + bindparam("add"),
    )
)
_FINISH = (
    update(Run)
    .where(Run.id == bindparam("rid"))
    .values(
        status=bindparam("new_status"),
        error_code=bindparam("new_error_code"),
        error_message=bindparam("new_error_message"),
        note=bindparam("new_note"),
        finished_at=bindparam("now"),
        waiting=null(),
    )
)


def start_run(
    session: Session | Connection,
    *,
    user_id: str,
    conversation_id: str,
    user_message_id: str | None,
    replica_id: str,
    idempotency_key: str | None = None,
    profile_id: str | None = None,
    run_id: str | None = None,
) -> str:
    """Inserts a ``running`` run and returns its id (one prepared Core statement: this is on
    the way to the first token, where building a statement costs more than the insert)."""
    now = utcnow()
    run_id = run_id or new_id()
    connection_of(session).execute(
        _INSERT_RUN,
        {
            "id": run_id,
            "user_id": user_id,
            "conversation_id": conversation_id,
            "user_message_id": user_message_id,
            "idempotency_key": idempotency_key,
            "profile_id": profile_id,
            "replica_id": replica_id,
            "status": "running",
            "heartbeat_at": now,
            "created_at": now,
            "last_seq": 0,
            "prompt_tokens": 0,
            "completion_tokens": 0,
            "cost": 0.0,
        },
    )
    return run_id


def create_run(session: Session, **values: Any) -> Run:
    """Like :func:`start_run`, returning the row."""
    run = session.get(Run, start_run(session, **values))
    assert run is not None
    return run


def store_events(session: Session, run_id: str, events: Sequence[RunEvent]) -> None:
    """Stores a batch of events (one multi-row insert) and advances the run's ``last_seq``."""
    if not events:
        return
    now = utcnow()
    connection = session.connection()
    connection.execute(
        _INSERT_EVENT,
        [
            {"run_id": run_id, "seq": e.seq, "type": e.type, "data": e.data, "created_at": now}
            for e in events
        ],
    )
    connection.execute(_SET_LAST_SEQ, {"rid": run_id, "new_seq": max(e.seq for e in events)})


def events_after(
    session: Session, run_id: str, after: int, limit: int | None = None
) -> list[RunEvent]:
    query = (
        select(RunEventRow)
        .where(RunEventRow.run_id == run_id, RunEventRow.seq > after)
        .order_by(RunEventRow.seq)
    )
    if limit is not None:
        query = query.limit(limit)
    return [RunEvent(r.seq, r.type, dict(r.data)) for r in session.scalars(query)]


def last_seq(session: Session, run_id: str) -> int:
    value = session.scalar(select(func.max(RunEventRow.seq)).where(RunEventRow.run_id == run_id))
    return int(value or 0)


def finish_run(
    session: Session,
    run_id: str,
    status: str,
    *,
    error_code: str | None = None,
    error_message: str | None = None,
    note: str | None = None,
) -> None:
    assert status in FINISHED_STATUSES
    session.connection().execute(
        _FINISH,
        {
            "rid": run_id,
            "new_status": status,
            "new_error_code": error_code,
            "new_error_message": error_message,
            "new_note": note,
            "now": utcnow(),
        },
    )


def heartbeat(session: Session, run_ids: Iterable[str], replica_id: str) -> None:
    ids = list(run_ids)
    if ids:
        session.execute(
            update(Run)
            .where(Run.id.in_(ids), Run.status == "running")
            .values(heartbeat_at=utcnow(), replica_id=replica_id)
        )


# --- tool calls ---------------------------------------------------------------------------


def tool_started(
    session: Session,
    *,
    run_id: str,
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
) -> str:
    """Record a tool call *before* it is made, so a crash leaves evidence (TURN-3); an "ask
    first" call is recorded ``waiting`` (PROV-6).  The arguments are kept with their SHA-256
    digest, which the administrators' list shows."""
    assert status in ("started", "waiting")
    row = ToolCallRow(
        run_id=run_id,
        conversation_id=conversation_id,
        call_id=call_id,
        name=name,
        arguments=arguments,
        arguments_sha256=hashlib.sha256(arguments.encode("utf-8")).hexdigest(),
        message_id=message_id,
        server_id=server_id,
        server_name=server_name,
        tool=tool,
        user_id=user_id,
        status=status,
        started_at=utcnow(),
    )
    session.add(row)
    session.flush()
    return row.id


def tool_finished(
    session: Session, row_id: str, status: str, result: str, duration_ms: int | None = None
) -> None:
    session.execute(
        update(ToolCallRow)
        .where(ToolCallRow.id == row_id)
        .values(status=status, result=result, finished_at=utcnow(), duration_ms=duration_ms)
    )


def tool_approved(session: Session, row_id: str) -> None:
    """An "ask first" call the user approved is about to be made."""
    session.execute(update(ToolCallRow).where(ToolCallRow.id == row_id).values(status="started"))


def set_waiting(session: Session, run_id: str, waiting: dict[str, Any] | None) -> None:
    """PROV-6: the call a running turn waits on (shown in the run's JSON), or None."""
    value = waiting if waiting is not None else null()
    session.execute(update(Run).where(Run.id == run_id).values(waiting=value))


def tool_call_page(
    session: Session,
    *,
    limit: int = 100,
    before: str | None = None,
    user_id: str | None = None,
    server_id: str | None = None,
) -> tuple[list[dict[str, Any]], str | None]:
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
    items = [tool_call_public(row, name) for row, name in rows[:limit]]
    return items, (items[-1]["id"] if len(rows) > limit else None)


def tool_call_public(row: ToolCallRow, user_name: str | None) -> dict[str, Any]:
    """One recorded call: who, when, where, what (the arguments' digest), how it ended."""
    return {
        "id": row.id,
        "user": {"id": row.user_id, "name": user_name},
        "run_id": row.run_id,
        "conversation_id": row.conversation_id,
        "call_id": row.call_id,
        "server": {"id": row.server_id, "name": row.server_name},
        "tool": row.tool or row.name,
        "name": row.name,
        "arguments_sha256": row.arguments_sha256,
        "status": row.status,
        "decision": (
            {"decision": row.decision, "by": row.decided_by, "at": iso(row.decided_at)}
            if row.decision
            else None
        ),
        "started_at": iso(row.started_at),
        "finished_at": iso(row.finished_at),
        "duration_ms": row.duration_ms,
    }


def run_tool_calls(session: Session, run_id: str) -> list[ToolCallRow]:
    return list(
        session.scalars(
            select(ToolCallRow).where(ToolCallRow.run_id == run_id).order_by(ToolCallRow.started_at)
        )
    )


# --- usage ledger (USE-1) -----------------------------------------------------------------


def record_usage(
    session: Session,
    *,
    user_id: str,
    conversation_id: str | None,
    run_id: str | None,
    kind: str,
    profile_id: str | None,
    model: str | None,
    prompt_tokens: int,
    completion_tokens: int,
    cost: float,
    estimated_prompt_tokens: int | None = None,
    estimated: bool = False,
) -> None:
    """One ledger row (USE-1).  ``estimated``: the provider reported no usage and the tokens
    were counted by chatmem (PROV-1).  An ``overflow`` row (PROV-2) is not a billed call: it
    is not added to the run's totals."""
    # Prepared Core statements: this is in every answer's checkpoint.
    connection = session.connection()
    connection.execute(
        _INSERT_USAGE,
        {
            "user_id": user_id,
            "conversation_id": conversation_id,
            "run_id": run_id,
            "kind": kind,
            "profile_id": profile_id,
            "model": model,
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "estimated_prompt_tokens": estimated_prompt_tokens,
            "estimated": estimated,
            "cost": cost,
            "created_at": utcnow(),
        },
    )
    if run_id is not None and kind != "overflow":
        connection.execute(
            _ADD_RUN_USAGE,
            {"rid": run_id, "prompt": prompt_tokens, "completion": completion_tokens, "add": cost},
        )


def conversation_cost(session: Session, conversation_id: str) -> float:
    value = session.scalar(
        select(func.coalesce(func.sum(UsageRow.cost), 0.0)).where(
            UsageRow.conversation_id == conversation_id
        )
    )
    return float(value or 0.0)


def spent_since(session: Session | Connection, user_id: str, since: datetime) -> float:
    value = session.scalar(
        select(func.coalesce(func.sum(UsageRow.cost), 0.0)).where(
            UsageRow.user_id == user_id, UsageRow.created_at >= since
        )
    )
    return float(value or 0.0)


# --- public shapes ------------------------------------------------------------------------


def run_public(run: Run) -> dict[str, Any]:
    return {
        "id": run.id,
        "conversation_id": run.conversation_id,
        "status": run.status,
        "user_message_id": run.user_message_id,
        "error": (
            {"code": run.error_code, "message": run.error_message} if run.error_code else None
        ),
        "note": run.note,
        "usage": {
            "prompt_tokens": run.prompt_tokens,
            "completion_tokens": run.completion_tokens,
        },
        "cost": round(run.cost, 8),
        "currency": "USD",
        "last_event_id": run.last_seq,
        # PROV-6: the "ask first" tool call the turn waits on (it stays ``running``).
        "waiting": run.waiting if run.status == "running" else None,
        "created_at": iso(run.created_at),
        "finished_at": iso(run.finished_at),
    }
