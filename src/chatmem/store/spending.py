"""Reading the usage ledger for limits and the usage page (USE-1 … USE-5), and the
extension requests with the administrators' answers.

The ledger itself is written by :mod:`chatmem.store.runs`; this module only reads it, per
window (``since``): the rows that count against a limit, and the spending per model and per
conversation.  A granted extension (``extension_requests.status = 'granted'``) raises the
included usage: ``permanent`` ones always, ``period`` ones while the window they were granted
in lasts (see :func:`granted_since`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, bindparam, case, func, select
from sqlalchemy.orm import Session

from chatmem.store.db import connection_of
from chatmem.store.tables.accounts import User
from chatmem.store.tables.conversations import Conversation
from chatmem.store.tables.profiles import ModelProfile
from chatmem.store.tables.runs import ExtensionRequest, UsageRow
from chatmem.store.types import iso

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


def request_public(row: ExtensionRequest, user_name: str | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": row.id,
        "user_id": row.user_id,
        "reason": row.reason or None,
        "status": row.status,
        "amount_usd": row.amount_usd,
        "scope": row.scope,
        "created_at": iso(row.created_at),
        "decided_at": iso(row.decided_at),
    }
    if user_name is not None:
        body["user_name"] = user_name
    return body


def user_requests(session: Session | Connection, user_id: str, limit: int = 20) -> list[Any]:
    """The user's extension requests, newest first, with their outcome."""
    return list(
        session.execute(
            select(ExtensionRequest)
            .where(ExtensionRequest.user_id == user_id)
            .order_by(ExtensionRequest.created_at.desc(), ExtensionRequest.id)
            .limit(limit)
        ).scalars()
    )


@dataclass(frozen=True)
class RequestRow:
    request: ExtensionRequest
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
    return [RequestRow(row, name) for row, name in session.execute(query)]
