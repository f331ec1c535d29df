"""The durable side of runs: rows, stored events, tool-call records and the usage ledger.

Plain synchronous functions over a SQLAlchemy ``Session`` (the runner calls them in a worker
thread, routes call them directly).  A run is read as a :class:`RunRecord` (a frozen copy of
its row, not an ORM object); a stored event as a :class:`StoredEvent`.  Every lookup is scoped
to the owner: a foreign run id answers exactly like a missing one (STORE-1).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, fields
from datetime import datetime
from typing import Any, Protocol

from sqlalchemy import (
    Connection,
    Integer,
    String,
    Text,
    and_,
    bindparam,
    func,
    insert,
    null,
    or_,
    select,
    text,
    update,
)
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.orm import Session

from chatmem.errors import Conflict, NotFound
from chatmem.store.db import connection_of
from chatmem.store.tables.accounts import User
from chatmem.store.tables.conversations import Conversation
from chatmem.store.tables.runs import (
    RUN_STATUSES,
    TOOL_DECISIONS,
    TOOL_STATUSES,
    USAGE_KINDS,
    ExtensionRequest,
    Run,
    RunEventRow,
    ToolCallRow,
    UsageRow,
)
from chatmem.store.types import UTCDateTime, iso, new_id, utcnow

FINISHED_STATUSES = frozenset(RUN_STATUSES) - {"running"}


@dataclass(frozen=True, slots=True)
class RunRecord:
    """One run as stored (the ``runs`` row, read once; ``heartbeat_at`` is for operators
    and is not read back)."""

    id: str
    conversation_id: str
    user_id: str
    status: str
    idempotency_key: str | None
    user_message_id: str | None
    profile_id: str | None
    error_code: str | None
    error_message: str | None
    note: str | None
    replica_id: str | None
    last_seq: int
    prompt_tokens: int
    completion_tokens: int
    cost: float
    created_at: datetime
    finished_at: datetime | None
    #: PROV-6: the "ask first" tool call the run waits on, or None.
    waiting: dict[str, Any] | None
    #: USE-4: the profile that answered, and why it is not the one chosen (None: it is).
    answered_by: str | None
    answered_reason: str | None


@dataclass(frozen=True, slots=True)
class StoredEvent:
    """One stored run event (``run_events``)."""

    seq: int
    type: str
    data: dict[str, Any]


class Event(Protocol):
    """What :func:`store_events` needs of an event (the turns' ``RunEvent`` is one)."""

    @property
    def seq(self) -> int: ...

    @property
    def type(self) -> str: ...

    @property
    def data(self) -> dict[str, Any]: ...


_RUN_COLUMNS = select(*(getattr(Run, f.name) for f in fields(RunRecord)))
_OWNED_RUN = _RUN_COLUMNS.where(Run.id == bindparam("rid"), Run.user_id == bindparam("uid"))


def _run_record(row: Any) -> RunRecord:
    return RunRecord(*row)


def owned_run(session: Session, user_id: str, run_id: str) -> RunRecord:
    row = session.execute(_OWNED_RUN, {"rid": run_id, "uid": user_id}).first()
    if row is None:
        raise NotFound("run")
    return _run_record(row)


_RUN_OWNER = select(Run.user_id).where(Run.id == bindparam("rid"))


def run_owner_id(connection: Connection, run_id: str) -> str | None:
    """Whose run this is (None for an unknown id): one indexed read, for the events stream."""
    owner: str | None = connection.execute(_RUN_OWNER, {"rid": run_id}).scalar()
    return owner


def run_for_idempotency_key(session: Session, user_id: str, key: str) -> RunRecord | None:
    row = session.execute(
        _RUN_COLUMNS.where(Run.user_id == user_id, Run.idempotency_key == key)
    ).first()
    return None if row is None else _run_record(row)


def running_run(session: Session, conversation_id: str) -> RunRecord | None:
    row = session.execute(
        _RUN_COLUMNS.where(Run.conversation_id == conversation_id, Run.status == "running")
        .order_by(Run.created_at.desc())
        .limit(1)
    ).first()
    return None if row is None else _run_record(row)


def conversation_runs(
    session: Session, conversation_id: str, *, active_only: bool = False, limit: int = 50
) -> list[RunRecord]:
    query = _RUN_COLUMNS.where(Run.conversation_id == conversation_id)
    if active_only:
        query = query.where(Run.status == "running")
    rows = session.execute(query.order_by(Run.created_at.desc()).limit(limit))
    return [_run_record(row) for row in rows]


# The statements of every turn, built once (building one costs SQLAlchemy more than SQLite
# takes to run it).  Executed on the session's connection: plain Core, no ORM bookkeeping.
_INSERT_RUN = insert(Run)
_INSERT_EVENT = insert(RunEventRow)
_INSERT_USAGE = insert(UsageRow)
_INSERT_TOOL_CALL = insert(ToolCallRow)
_SET_LAST_SEQ = update(Run).where(Run.id == bindparam("rid")).values(last_seq=bindparam("new_seq"))
#: PostgreSQL: a batch and the run's ``last_seq`` in one statement — the server is a network
#: round trip away, and a batch is written for every burst of every turn (the first one on
#: the way to its first token).  The rows come as parallel arrays, so the text is one for any
#: batch size; ``data`` is JSON text, as SQLAlchemy's JSON type would send it.
_STORE_BATCH_PG = text(
    """
    WITH stored AS (
        INSERT INTO run_events (run_id, seq, type, data, created_at)
        SELECT :rid, batch.seq, batch.type, CAST(batch.data AS json), :now
        FROM unnest(:seqs, :types, :datas) AS batch (seq, type, data)
        RETURNING seq
    )
    UPDATE runs SET last_seq = (SELECT max(seq) FROM stored) WHERE id = :rid
    """
).bindparams(
    bindparam("now", type_=UTCDateTime()),
    bindparam("seqs", type_=ARRAY(Integer)),
    bindparam("types", type_=ARRAY(String)),
    bindparam("datas", type_=ARRAY(Text)),
)
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
    answered_by: str | None = None,
    answered_reason: str | None = None,
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
            "answered_by": answered_by,
            "answered_reason": answered_reason,
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


def store_events(session: Session | Connection, run_id: str, events: Sequence[Event]) -> None:
    """Stores a batch of events (one multi-row insert) and advances the run's ``last_seq``."""
    if not events:
        return
    now = utcnow()
    connection = connection_of(session)
    if connection.dialect.name == "postgresql":
        connection.execute(
            _STORE_BATCH_PG,
            {
                "rid": run_id,
                "now": now,
                "seqs": [e.seq for e in events],
                "types": [e.type for e in events],
                "datas": [json.dumps(e.data) for e in events],
            },
        )
        return
    store_event_batches(connection, [(run_id, events)])


def store_event_batches(
    connection: Connection, batches: Sequence[tuple[str, Sequence[Event]]]
) -> None:
    """The batches of several runs (``(run_id, events)``, each run's in order) in two
    statements: one insert of every row, one update of each run's ``last_seq`` (SQLite's
    shared event writer, and its :func:`store_events`; on PostgreSQL one statement per batch,
    side by side, measured faster)."""
    now = utcnow()
    rows = [
        {"run_id": run_id, "seq": e.seq, "type": e.type, "data": e.data, "created_at": now}
        for run_id, events in batches
        for e in events
    ]
    if not rows:
        return
    last: dict[str, int] = {}
    for run_id, events in batches:
        for e in events:
            last[run_id] = max(last.get(run_id, 0), e.seq)
    connection.execute(_INSERT_EVENT, rows)
    connection.execute(_SET_LAST_SEQ, [{"rid": rid, "new_seq": seq} for rid, seq in last.items()])


def events_after(
    session: Session, run_id: str, after: int, limit: int | None = None
) -> list[StoredEvent]:
    query = (
        select(RunEventRow.seq, RunEventRow.type, RunEventRow.data)
        .where(RunEventRow.run_id == run_id, RunEventRow.seq > after)
        .order_by(RunEventRow.seq)
    )
    if limit is not None:
        query = query.limit(limit)
    return [StoredEvent(seq, type_, dict(data)) for seq, type_, data in session.execute(query)]


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
    row_id = new_id()
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
            "started_at": utcnow(),
        },
    )
    return row_id


def tool_finished(
    session: Session, row_id: str, status: str, result: str, duration_ms: int | None = None
) -> None:
    assert status in TOOL_STATUSES
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
    assert kind in USAGE_KINDS
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


#: How many recent answers the calibration looks at (CTX-2).
CALIBRATION_WINDOW = 20


@dataclass(frozen=True, slots=True)
class CalibrationRow:
    """A ledger row the calibration learns from (CTX-2, PROV-2): an ``answer`` or an
    ``overflow``, the tokens the provider reported or named and chatmem's raw estimate."""

    kind: str
    prompt_tokens: int
    estimated_prompt_tokens: int


# Read at every turn: built once (building it costs more than running it).  Rows counted by
# chatmem itself (``estimated``, PROV-1) teach nothing: only what a provider reported.
_CALIBRATION = (
    select(UsageRow.kind, UsageRow.prompt_tokens, UsageRow.estimated_prompt_tokens)
    .where(
        UsageRow.profile_id == bindparam("profile_id"),
        UsageRow.kind.in_(("answer", "overflow")),
        UsageRow.estimated.is_(False),
        UsageRow.estimated_prompt_tokens.is_not(None),
        UsageRow.estimated_prompt_tokens > 0,
    )
    .order_by(UsageRow.num.desc())
    .limit(CALIBRATION_WINDOW)
)


def calibration_rows(session: Session | Connection, profile_id: str) -> list[CalibrationRow]:
    """The profile's most recent :data:`CALIBRATION_WINDOW` answers and overflows that a
    provider reported, newest first."""
    rows = connection_of(session).execute(_CALIBRATION, {"profile_id": profile_id})
    return [
        CalibrationRow(kind, int(prompt or 0), int(estimated or 0))
        for kind, prompt, estimated in rows
    ]


def spent_since(session: Session | Connection, user_id: str, since: datetime) -> float:
    value = session.scalar(
        select(func.coalesce(func.sum(UsageRow.cost), 0.0)).where(
            UsageRow.user_id == user_id, UsageRow.created_at >= since
        )
    )
    return float(value or 0.0)


def spent_per_conversation(
    session: Session | Connection, user_id: str, *, limit: int = 200
) -> list[tuple[str | None, str | None, float]]:
    """The user's spending per conversation, most first: (conversation id, its title — None
    once deleted, the ledger outlives it — and the cost)."""
    rows = session.execute(
        select(UsageRow.conversation_id, Conversation.title, func.sum(UsageRow.cost))
        .join(Conversation, Conversation.id == UsageRow.conversation_id, isouter=True)
        .where(UsageRow.user_id == user_id)
        .group_by(UsageRow.conversation_id, Conversation.title)
        .order_by(func.sum(UsageRow.cost).desc())
        .limit(limit)
    )
    return [(cid, title, float(cost or 0.0)) for cid, title, cost in rows]


# --- extension requests (USE-3) -----------------------------------------------------------


def last_extension_request(session: Session, user_id: str, since: datetime) -> datetime | None:
    """When the user last asked for an extension at or after ``since`` (None: not since)."""
    value: datetime | None = session.scalar(
        select(func.max(ExtensionRequest.created_at)).where(
            ExtensionRequest.user_id == user_id, ExtensionRequest.created_at >= since
        )
    )
    return value


def add_extension_request(session: Session, user_id: str, reason: str) -> datetime:
    """Records a request for an extension; returns when it was made."""
    now = utcnow()
    session.add(ExtensionRequest(user_id=user_id, reason=reason, created_at=now))
    session.flush()
    return now


# --- public shapes ------------------------------------------------------------------------


def run_public(run: RunRecord) -> dict[str, Any]:
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
        "answered_by": run.answered_by,
        "answered_reason": run.answered_reason,
        "created_at": iso(run.created_at),
        "finished_at": iso(run.finished_at),
    }
