"""Usage and limits (USE-1 … USE-3): what a user spent, against what is included.

Spending comes from the usage ledger (one row per model call, written by the runner and the
compaction).  Included usage is configured per deployment (``usage_session_limit`` per
rolling session window of ``usage_session_hours``, ``usage_week_limit`` per rolling 7 days,
in USD; unset = unlimited).  The ring fills to the higher of the two fractions.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from sqlalchemy import Connection
from sqlalchemy.orm import Session

from chatmem.errors import InsufficientCredits
from chatmem.settings import Settings
from chatmem.store import runs
from chatmem.store.types import iso, utcnow

#: A second extension request within this window is answered "already notified".
EXTENSION_REPEAT_WINDOW = timedelta(hours=24)


def _limit(settings: Settings, name: str) -> float | None:
    value = getattr(settings, name, None)
    return float(value) if value is not None else None


def usage_summary(
    session: Session | Connection, user_id: str, settings: Settings
) -> dict[str, Any]:
    now = utcnow()
    hours = float(getattr(settings, "usage_session_hours", 5.0) or 5.0)
    session_spent = runs.spent_since(session, user_id, now - timedelta(hours=hours))
    week_spent = runs.spent_since(session, user_id, now - timedelta(days=7))
    total = runs.spent_since(session, user_id, now - timedelta(days=36500))
    session_limit = _limit(settings, "usage_session_limit")
    week_limit = _limit(settings, "usage_week_limit")
    fractions = []
    if session_limit:
        fractions.append(session_spent / session_limit)
    if week_limit:
        fractions.append(week_spent / week_limit)
    ring = max(fractions) if fractions else 0.0
    exhausted_by = None
    if session_limit and session_spent >= session_limit:
        exhausted_by = "session"
    elif week_limit and week_spent >= week_limit:
        exhausted_by = "week"
    per_conversation = [
        {"conversation_id": cid, "title": title, "cost": round(float(cost), 8)}
        for cid, title, cost in runs.spent_per_conversation(session, user_id)
    ]
    return {
        "currency": "USD",
        "total": round(total, 8),
        "session": {
            "hours": hours,
            "spent": round(session_spent, 8),
            "included": session_limit,
        },
        "week": {"spent": round(week_spent, 8), "included": week_limit},
        "ring": round(min(ring, 1.0), 4),
        "exhausted": exhausted_by is not None,
        "exhausted_by": exhausted_by,
        "fallback_profile_id": getattr(settings, "usage_fallback_profile_id", None),
        "extension_requests": bool(getattr(settings, "usage_extension_requests", True)),
        "conversations": per_conversation,
    }


def check_can_spend(session: Session, user_id: str, settings: Settings, amount: float) -> None:
    """Refuses a paid action (manual compaction) when the included usage is used up."""
    if amount <= 0:
        return
    summary = usage_summary(session, user_id, settings)
    if summary["exhausted"]:
        raise InsufficientCredits()


def request_extension(session: Session, user_id: str, settings: Settings) -> dict[str, Any]:
    summary = usage_summary(session, user_id, settings)
    reason = summary["exhausted_by"] or ""
    since = utcnow() - EXTENSION_REPEAT_WINDOW
    recent = runs.last_extension_request(session, user_id, since)
    if recent is not None:
        return {
            "notified": False,
            "already_notified": True,
            "message": "Administrators were already notified",
            "requested_at": iso(recent),
        }
    requested = runs.add_extension_request(session, user_id, reason)
    return {
        "notified": True,
        "already_notified": False,
        "message": "The administrators were notified",
        "requested_at": iso(requested),
    }


def fallback_profile(session: Session | Connection, user_id: str, settings: Settings) -> str | None:
    """USE-3: when the included usage is used up, turns answer with the fallback profile."""
    fallback = getattr(settings, "usage_fallback_profile_id", None)
    if not fallback:
        return None
    if settings.usage_session_limit is None and settings.usage_week_limit is None:
        return None
    return fallback if usage_summary(session, user_id, settings)["exhausted"] else None
