"""The durable side of runs: their rows and their stored events, and what recovery reads
and writes of an interrupted run (TURN-3).

Plain synchronous functions over a SQLAlchemy ``Session`` (the runner calls them in a worker
thread, routes call them directly).  A run is read as a :class:`RunRecord` (a frozen copy of
its row, not an ORM object); a stored event as a :class:`StoredEvent`.  Every lookup is scoped
to the owner: a foreign run id answers exactly like a missing one (STORE-1).  Tool calls are
:mod:`chatmem.store.tool_calls`'; the usage ledger is :mod:`chatmem.store.ledger`'s.
"""

from __future__ import annotations

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
    bindparam,
    func,
    insert,
    null,
    select,
    text,
    update,
)
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.orm import Session

from chatmem.errors import NotFound
from chatmem.store.conversations import conversation_by_id
from chatmem.store.db import connection_of
from chatmem.store.messages import append_message, complete_message
from chatmem.store.tables.conversations import Conversation, Message
from chatmem.store.tables.runs import RUN_STATUSES, Run, RunEventRow
from chatmem.store.types import UTCDateTime, new_id, utcnow

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


def set_waiting(session: Session, run_id: str, waiting: dict[str, Any] | None) -> None:
    """PROV-6: the call a running turn waits on (shown in the run's JSON), or None."""
    value = waiting if waiting is not None else null()
    session.execute(update(Run).where(Run.id == run_id).values(waiting=value))


# --- recovery (TURN-3) --------------------------------------------------------------------


def running_runs(session: Session) -> list[RunRecord]:
    """Every run still ``running`` (at start-up: their process may have died)."""
    return [
        _run_record(row) for row in session.execute(_RUN_COLUMNS.where(Run.status == "running"))
    ]


def lock_running_run(session: Session, run_id: str) -> RunRecord | None:
    """The run, its row locked for the transaction — or None when it is unknown or has
    already ended (then there is nothing to interrupt)."""
    run = session.get(Run, run_id, with_for_update=True)
    if run is None or run.status != "running":
        return None
    return RunRecord(*(getattr(run, f.name) for f in fields(RunRecord)))


def conversation_exists(session: Session, conversation_id: str) -> bool:
    return session.get(Conversation, conversation_id) is not None


def streamed_events(session: Session, run_id: str) -> list[StoredEvent]:
    """The run's stored ``delta`` and ``reasoning`` events, in order: what it streamed."""
    rows = session.execute(
        select(RunEventRow.seq, RunEventRow.type, RunEventRow.data)
        .where(RunEventRow.run_id == run_id, RunEventRow.type.in_(("delta", "reasoning")))
        .order_by(RunEventRow.seq)
    )
    return [StoredEvent(seq, type_, dict(data)) for seq, type_, data in rows]


@dataclass(frozen=True, slots=True)
class StepMessage:
    """The assistant message a run stored for one step of its answer."""

    id: str
    content: str
    meta: dict[str, Any]


def step_message(
    session: Session, conversation_id: str, run_id: str, step: int
) -> StepMessage | None:
    """The assistant message stored for ``step`` of the run, looked for among the
    conversation's last 50 assistant messages (None: none there)."""
    for message in session.scalars(
        select(Message)
        .where(Message.conversation_id == conversation_id, Message.role == "assistant")
        .order_by(Message.seq.desc())
        .limit(50)
    ):
        meta = message.meta or {}
        if meta.get("run_id") == run_id and meta.get("step") == step:
            return StepMessage(message.id, message.content, dict(meta))
    return None


def complete_step_message(
    session: Session, message_id: str, content: str, meta: dict[str, Any]
) -> None:
    """Replaces the message's text with the longer one that starts with it (see
    :func:`chatmem.store.messages.complete_message`)."""
    complete_message(session, message_id, content, meta)


def add_run_message(
    session: Session,
    conversation_id: str,
    role: str,
    content: str,
    *,
    meta: dict[str, Any],
    tool_call_id: str | None = None,
) -> None:
    """Appends a message a run leaves behind (its interrupted answer, a tool call's result)."""
    conversation = conversation_by_id(session, conversation_id)
    assert conversation is not None
    append_message(session, conversation, role, content, tool_call_id=tool_call_id, meta=meta)


def tool_call_answered(session: Session, conversation_id: str, call_id: str) -> bool:
    """Whether the conversation holds a tool message answering the call ``call_id``."""
    answered = session.scalar(
        select(Message.id).where(
            Message.conversation_id == conversation_id,
            Message.role == "tool",
            Message.tool_call_id == call_id,
        )
    )
    return answered is not None
