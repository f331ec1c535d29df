"""Usage and limits (USE-1 … USE-5): what a user spent, against what is included, and which
model answers a turn.

Spending comes from the usage ledger (one row per model call, written by the runner and the
compaction).  Included usage is configured per deployment (``usage_session_limit`` per
rolling session window of ``usage_session_hours``, ``usage_week_limit`` per rolling 7 days,
in USD; unset = unlimited); an administrator may set a user's own limits instead, and grant
extensions on top (a ``period`` grant counts while the window it was granted in lasts, a
``permanent`` one always).  The ring fills to the higher of the two fractions.

**When a window resets.**  The windows roll, so spending leaves them one ledger row at a
time.  ``resets_at`` is when the bar next changes for the user: while the included usage is
used up, the moment enough of the oldest spending has left the window to bring it under the
limit again; otherwise the moment the oldest spending in the window leaves it (None when
nothing was spent in it).

**Who answers a turn** — the chosen profile, the fallback under a lock (USE-3) or Auto's pick
(USE-4) — is :mod:`chatmem.turns.answerer`'s.

Every function takes ``now`` (UTC) for tests; callers in the app pass nothing.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from chatmem.errors import Forbidden, InsufficientCredits
from chatmem.settings import Settings
from chatmem.store import ledger
from chatmem.store.ledger import ExtensionRecord, profile_name
from chatmem.store.profiles import AUTO_PROFILE
from chatmem.store.sessions import Connection, Session
from chatmem.store.types import iso, utcnow

log = logging.getLogger(__name__)

#: A second extension request within this window is answered "already notified".
EXTENSION_REPEAT_WINDOW = timedelta(hours=24)
#: The conversation's ``profile_id`` when Auto chooses (USE-4).
AUTO = AUTO_PROFILE
WEEK = timedelta(days=7)


@dataclass(frozen=True)
class Included:
    """A user's included usage before grants (None: unlimited) and the window length."""

    session: float | None
    week: float | None
    session_hours: float

    @property
    def limited(self) -> bool:
        return self.session is not None or self.week is not None


# The chosen profile and the owner's limits in one read (every turn, USE-3/USE-4).
def included_usage(
    session: Session | Connection,
    user_id: str,
    settings: Settings,
    own: tuple[float | None, float | None] | None = None,
) -> Included:
    """The user's own limits where an administrator set them (``own`` when already read),
    else the deployment's."""
    if own is None:
        own = ledger.own_limits(session, user_id)
    own_session, own_week = own
    hours = float(settings.usage_session_hours or 5.0)
    return Included(
        session=float(own_session) if own_session is not None else settings.usage_session_limit,
        week=float(own_week) if own_week is not None else settings.usage_week_limit,
        session_hours=hours,
    )


@dataclass(frozen=True)
class Window:
    """One limit's window as it stands now."""

    spent: float
    included: float | None  # with grants; None: unlimited
    resets_at: datetime | None

    @property
    def exhausted(self) -> bool:
        return self.included is not None and self.spent >= self.included

    @property
    def fraction(self) -> float:
        return self.spent / self.included if self.included else 0.0


def reset_time(
    costs: list[tuple[datetime, float]], length: timedelta, included: float | None
) -> datetime | None:
    """See the module docstring: when the bar of a rolling window next changes."""
    if not costs:
        return None
    spent = sum(cost for _, cost in costs)
    if included is None or spent < included:
        return costs[0][0] + length
    for created, cost in costs:
        spent -= cost
        if spent < included:
            return created + length
    return costs[-1][0] + length  # pragma: no cover - the loop ends below any limit >= 0


def _window(
    session: Session | Connection,
    user_id: str,
    base: float | None,
    length: timedelta,
    now: datetime,
) -> Window:
    since = now - length
    costs = ledger.costs_since(session, user_id, since)
    included = None if base is None else base + ledger.granted_since(session, user_id, since)
    return Window(
        spent=sum(cost for _, cost in costs),
        included=included,
        resets_at=reset_time(costs, length, included),
    )


def _windows(
    session: Session | Connection, user_id: str, settings: Settings, now: datetime
) -> tuple[Included, Window, Window]:
    limits = included_usage(session, user_id, settings)
    return (
        limits,
        _window(session, user_id, limits.session, timedelta(hours=limits.session_hours), now),
        _window(session, user_id, limits.week, WEEK, now),
    )


def exhausted_by(
    session: Session | Connection,
    user_id: str,
    settings: Settings,
    now: datetime | None = None,
    *,
    limits: Included | None = None,
) -> str | None:
    """``session`` or ``week`` when that included usage is used up, else None.  On every
    turn's way to its first token: no read at all when the user has no limits (``limits``
    given), else two prepared statements."""
    limits = limits or included_usage(session, user_id, settings)
    if not limits.limited:
        return None
    now = now or utcnow()
    session_spent, week_spent, session_granted, week_granted = ledger.window_sums(
        session, user_id, now - timedelta(hours=limits.session_hours), now - WEEK
    )
    if limits.session is not None and session_spent >= limits.session + session_granted:
        return "session"
    if limits.week is not None and week_spent >= limits.week + week_granted:
        return "week"
    return None


def _window_public(window: Window, extra: dict[str, Any]) -> dict[str, Any]:
    return {
        **extra,
        "spent": round(window.spent, 8),
        "included": round(window.included, 8) if window.included is not None else None,
        "resets_at": iso(window.resets_at),
    }


def usage_summary(
    session: Session, user_id: str, settings: Settings, now: datetime | None = None
) -> dict[str, Any]:
    now = now or utcnow()
    limits, session_window, week_window = _windows(session, user_id, settings, now)
    total = ledger.spent_since(session, user_id, now - timedelta(days=36500))
    fractions = [w.fraction for w in (session_window, week_window) if w.included]
    ring = max(fractions) if fractions else 0.0
    exhausted = None
    if session_window.exhausted:
        exhausted = "session"
    elif week_window.exhausted:
        exhausted = "week"
    per_conversation = [
        {"conversation_id": cid, "title": title, "cost": round(float(cost), 8)}
        for cid, title, cost in ledger.spent_per_conversation(session, user_id)
    ]
    fallback_id = settings.usage_fallback_profile_id
    session_since = now - timedelta(hours=limits.session_hours)
    return {
        "currency": "USD",
        "total": round(total, 8),
        "session": _window_public(
            session_window,
            {
                "hours": limits.session_hours,
                "models": ledger.spent_per_model(session, user_id, session_since),
                "conversations": ledger.spent_per_conversation_since(
                    session, user_id, session_since
                ),
            },
        ),
        "week": _window_public(
            week_window,
            {
                "models": ledger.spent_per_model(session, user_id, now - WEEK),
                "conversations": ledger.spent_per_conversation_since(session, user_id, now - WEEK),
            },
        ),
        "ring": round(min(ring, 1.0), 4),
        "exhausted": exhausted is not None,
        "exhausted_by": exhausted,
        "fallback_profile_id": fallback_id,
        # USE-4: the fallback in force (only while the included usage is used up) and why.
        "fallback": (
            {
                "profile_id": fallback_id,
                "name": profile_name(session, fallback_id),
                "reason": exhausted,
            }
            if exhausted is not None and fallback_id
            else None
        ),
        "extension_requests": bool(settings.usage_extension_requests),
        "requests": [request_public(r) for r in ledger.user_requests(session, user_id)],
        "conversations": per_conversation,
        "models": ledger.spent_per_model(session, user_id),
    }


def request_public(row: ExtensionRecord, user_name: str | None = None) -> dict[str, Any]:
    """An extension request as the usage page and the admin console show it."""
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


def user_usage_brief(
    session: Session | Connection, user_id: str, settings: Settings, now: datetime | None = None
) -> dict[str, Any]:
    """A user's two windows as the admin console lists them (USE-5)."""
    now = now or utcnow()
    limits, session_window, week_window = _windows(session, user_id, settings, now)
    exhausted = "session" if session_window.exhausted else "week" if week_window.exhausted else None
    return {
        "session": _window_public(session_window, {"hours": limits.session_hours}),
        "week": _window_public(week_window, {}),
        "exhausted_by": exhausted,
    }


def check_can_spend(session: Session, user_id: str, settings: Settings, amount: float) -> None:
    """Refuses a paid action (manual compaction) when the included usage is used up."""
    if amount <= 0:
        return
    if exhausted_by(session, user_id, settings) is not None:
        raise InsufficientCredits()


def request_extension(session: Session, user_id: str, settings: Settings) -> dict[str, Any]:
    """USE-3: notifies the administrators; refused (``forbidden``) where extension requests
    are switched off, so no request waits in the admin page for nobody to act on."""
    if not settings.usage_extension_requests:
        raise Forbidden("Extension requests are switched off on this server.")
    reason = exhausted_by(session, user_id, settings) or ""
    since = utcnow() - EXTENSION_REPEAT_WINDOW
    recent = ledger.last_extension_request(session, user_id, since)
    if recent is not None:
        return {
            "notified": False,
            "already_notified": True,
            "message": "Administrators were already notified",
            "requested_at": iso(recent),
        }
    requested = ledger.add_extension_request(session, user_id, reason)
    # Administrators who watch the log see it too; the admin page lists it (USE-5).
    log.info("user %s asks for more included usage (%s)", user_id, reason or "not used up")
    return {
        "notified": True,
        "already_notified": False,
        "message": "The administrators were notified",
        "requested_at": iso(requested),
    }
