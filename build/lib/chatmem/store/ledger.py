"""The usage ledger (USE-1 … USE-5): one row per model call, what it cost; read back for
the calibration (CTX-2), the limits and the usage page; and the extension requests with the
administrators' answers.

The runner and the compaction write a row per call (:func:`record_usage`), which also adds
it to the run's totals — except an ``overflow`` row (PROV-2), which is not a billed call.
Reads are per window (``since``): the rows that count against a limit, and the spending per
model and per conversation.  A granted extension (``extension_requests.status = 'granted'``)
raises the included usage: ``permanent`` ones always, ``period`` ones while the window they
were granted in lasts (see :func:`granted_since`).  Requests are read as
:class:`ExtensionRecord` (frozen copies, not ORM objects).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, bindparam, case, func, insert, select, update
from sqlalchemy.orm import Session

from chatmem.store.db import connection_of
from chatmem.store.tables.accounts import User
from chatmem.store.tables.conversations import Conversation
from chatmem.store.tables.profiles import ModelProfile
from chatmem.store.tables.runs import USAGE_KINDS, ExtensionRequest, Run, UsageRow
from chatmem.store.types import utcnow


@dataclass(frozen=True, slots=True)
class ExtensionRecord:
    """One request for more included usage (``extension_requests``) and its outcome."""

    id: str
    user_id: str
    reason: str
    status: str
    amount_usd: float | None
    scope: str | None
    created_at: datetime
    decided_at: datetime | None


def extension_record(row: ExtensionRequest) -> ExtensionRecord:
    return ExtensionRecord(*(getattr(row, f.name) for f in fields(ExtensionRecord)))


# Prepared Core statements: these are in every answer's checkpoint.
_INSERT_USAGE = insert(UsageRow)
_ADD_RUN_USAGE = (
    update(Run)
    .where(Run.id == bindparam("rid"))
    .values(
        prompt_tokens=Run.prompt_tokens + bindparam("prompt"),
        completion_tokens=Run.completion_tokens + bindparam("completion"),
        cost=Run.cost + bindparam("add"),
    )
)


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


# --- reading the ledger: limits and the usage page (USE-3, USE-5) ---------------------------

EXTENSION_SCOPES = ("period", "permanent")


# On every turn's way to its first token when the user has limits (USE-3): built once
# (building a statement costs SQLAlchemy more than running it), run on the Core connection.
_SINCE_SESSION = bindparam("session_since", type_=UsageRow.created_at.type)
_SINCE_WEEK = bindparam("week_since", type_=UsageRow.created_at.type)
_SPENT_IN_WINDOWS = select(
    func.coalesce(func.sum(case((UsageRow.created_at >= _SINCE_SESSION, UsageRow.cost))), 0.0),
    func.coalesce(func.sum(case((UsageRow.created_at >= _SINCE_WEEK, UsageRow.cost))), 0.0),
).where(
    UsageRow.user_id == bindparam("uid"),
    UsageRow.created_at >= bindparam("since", type_=UsageRow.created_at.type),
)
_GRANTED = ExtensionRequest.amount_usd
_PERMANENT = ExtensionRequest.scope == "permanent"
_GRANTED_IN_WINDOWS = select(
    func.coalesce(
        func.sum(case((_PERMANENT | (ExtensionRequest.decided_at >= _SINCE_SESSION), _GRANTED))),
        0.0,
    ),
    func.coalesce(
        func.sum(case((_PERMANENT | (ExtensionRequest.decided_at >= _SINCE_WEEK), _GRANTED))),
        0.0,
    ),
).where(ExtensionRequest.user_id == bindparam("uid"), ExtensionRequest.status == "granted")


def window_sums(
    session: Session | Connection, user_id: str, session_since: datetime, week_since: datetime
) -> tuple[float, float, float, float]:
    """Spent and granted in the session and the week windows, in two statements:
    ``(session_spent, week_spent, session_granted, week_granted)``."""
    connection = connection_of(session)
    times = {"session_since": session_since, "week_since": week_since}
    spent = connection.execute(
        _SPENT_IN_WINDOWS, {**times, "uid": user_id, "since": min(session_since, week_since)}
    ).one()
    granted = connection.execute(_GRANTED_IN_WINDOWS, {**times, "uid": user_id}).one()
    return float(spent[0]), float(spent[1]), float(granted[0]), float(granted[1])


def costs_since(
    session: Session | Connection, user_id: str, since: datetime
) -> list[tuple[datetime, float]]:
    """The user's paid ledger rows at or after ``since``, oldest first: (when, cost)."""
    rows = session.execute(
        select(UsageRow.created_at, UsageRow.cost)
        .where(UsageRow.user_id == user_id, UsageRow.created_at >= since, UsageRow.cost > 0)
        .order_by(UsageRow.created_at, UsageRow.num)
    )
    return [(created, float(cost)) for created, cost in rows]


def spent_per_model(
    session: Session | Connection, user_id: str, since: datetime | None = None
) -> list[dict[str, Any]]:
    """Spending per profile (and the model it named), most first; the profile's name when it
    still exists."""
    query = (
        select(
            UsageRow.profile_id,
            UsageRow.model,
            ModelProfile.name,
            func.sum(UsageRow.cost),
            func.sum(UsageRow.prompt_tokens),
            func.sum(UsageRow.completion_tokens),
        )
        .join(ModelProfile, ModelProfile.id == UsageRow.profile_id, isouter=True)
        .where(UsageRow.user_id == user_id, UsageRow.kind != "overflow")
        .group_by(UsageRow.profile_id, UsageRow.model, ModelProfile.name)
        .order_by(func.sum(UsageRow.cost).desc())
    )
    if since is not None:
        query = query.where(UsageRow.created_at >= since)
    return [
        {
            "profile_id": pid,
            "model": model,
            "name": name,
            "cost": round(float(cost or 0.0), 8),
            "prompt_tokens": int(prompt or 0),
            "completion_tokens": int(completion or 0),
        }
        for pid, model, name, cost, prompt, completion in session.execute(query)
    ]


def spent_per_conversation_since(
    session: Session | Connection, user_id: str, since: datetime, *, limit: int = 200
) -> list[dict[str, Any]]:
    """Spending per conversation at or after ``since``, most first (title None once the
    conversation is deleted: the ledger outlives it)."""
    rows = session.execute(
        select(UsageRow.conversation_id, Conversation.title, func.sum(UsageRow.cost))
        .join(Conversation, Conversation.id == UsageRow.conversation_id, isouter=True)
        .where(UsageRow.user_id == user_id, UsageRow.created_at >= since)
        .group_by(UsageRow.conversation_id, Conversation.title)
        .order_by(func.sum(UsageRow.cost).desc())
        .limit(limit)
    )
    return [
        {"conversation_id": cid, "title": title, "cost": round(float(cost or 0.0), 8)}
        for cid, title, cost in rows
    ]


def granted_since(session: Session | Connection, user_id: str, since: datetime) -> float:
    """USD granted to the user that count in a window starting at ``since``: every permanent
    grant, and the period grants decided within the window."""
    value = session.scalar(
        select(func.coalesce(func.sum(ExtensionRequest.amount_usd), 0.0)).where(
            ExtensionRequest.user_id == user_id,
            ExtensionRequest.status == "granted",
            (ExtensionRequest.scope == "permanent") | (ExtensionRequest.decided_at >= since),
        )
    )
    return float(value or 0.0)


def user_requests(
    session: Session | Connection, user_id: str, limit: int = 20
) -> list[ExtensionRecord]:
    """The user's extension requests, newest first, with their outcome."""
    rows = session.execute(
        select(ExtensionRequest)
        .where(ExtensionRequest.user_id == user_id)
        .order_by(ExtensionRequest.created_at.desc(), ExtensionRequest.id)
        .limit(limit)
    ).scalars()
    return [extension_record(row) for row in rows]


@dataclass(frozen=True, slots=True)
class RequestRow:
    """An extension request in the administrators' list, with its user's name."""

    request: ExtensionRecord
    user_name: str


def all_requests(session: Session, status: str | None = None, limit: int = 200) -> list[RequestRow]:
    """Every user's extension requests (pending first, then newest), for administrators."""
    query = (
        select(ExtensionRequest, User.name)
        .join(User, User.id == ExtensionRequest.user_id)
        .order_by(
            (ExtensionRequest.status != "pending"),
            ExtensionRequest.created_at.desc(),
            ExtensionRequest.id,
        )
        .limit(limit)
    )
    if status is not None:
        query = query.where(ExtensionRequest.status == status)
    return [RequestRow(extension_record(row), name) for row, name in session.execute(query)]


# On every turn's way to its first token (USE-3/USE-4): built once, run on the Core connection.
_OWN_LIMITS = select(User.session_limit_usd, User.week_limit_usd).where(User.id == bindparam("uid"))


def own_limits(session: Session | Connection, user_id: str) -> tuple[float | None, float | None]:
    """The user's own session and week limits in USD, as an administrator set them (None:
    not set; the deployment's apply)."""
    row = connection_of(session).execute(_OWN_LIMITS, {"uid": user_id}).first()
    return (row[0], row[1]) if row is not None else (None, None)


def profile_name(session: Session | Connection, profile_id: str | None) -> str | None:
    """The name of the profile that answered or pays (None: none, or it is deleted)."""
    if not profile_id:
        return None
    row = session.execute(select(ModelProfile.name).where(ModelProfile.id == profile_id)).first()
    return str(row[0]) if row is not None else None
