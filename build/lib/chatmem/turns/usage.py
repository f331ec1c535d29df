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
from chatmem.store.types import utcnow

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


@dataclass(frozen=True)
class UsageSummary:
    """What the usage page shows (USE-4), as figures (its JSON: ``web/views/usage``): spent in
    all, per rolling session window and per week (each with its models and conversations),
    the ring, which included usage is used up, the fallback in force and the user's
    extension requests."""

    total: float
    limits: Included
    session: Window
    week: Window
    session_models: list[dict[str, Any]]
    session_conversations: list[dict[str, Any]]
    week_models: list[dict[str, Any]]
    week_conversations: list[dict[str, Any]]
    ring: float
    exhausted: str | None
    fallback_profile_id: str | None
    #: The fallback in force (USE-4): only while the included usage is used up (else None).
    fallback_name: str | None
    extension_requests: bool
    requests: list[ExtensionRecord]
    conversations: list[tuple[str | None, str | None, float]]
    models: list[dict[str, Any]]

    @property
    def fallback_in_force(self) -> bool:
        return self.exhausted is not None and bool(self.fallback_profile_id)


def usage_summary(
    session: Session, user_id: str, settings: Settings, now: datetime | None = None
) -> UsageSummary:
    now = now or utcnow()
    limits, session_window, week_window = _windows(session, user_id, settings, now)
    fractions = [w.fraction for w in (session_window, week_window) if w.included]
    exhausted = None
    if session_window.exhausted:
        exhausted = "session"
    elif week_window.exhausted:
        exhausted = "week"
    fallback_id = settings.usage_fallback_profile_id
    session_since = now - timedelta(hours=limits.session_hours)
    return UsageSummary(
        total=ledger.spent_since(session, user_id, now - timedelta(days=36500)),
        limits=limits,
        session=session_window,
        week=week_window,
        session_models=ledger.spent_per_model(session, user_id, session_since),
        session_conversations=ledger.spent_per_conversation_since(session, user_id, session_since),
        week_models=ledger.spent_per_model(session, user_id, now - WEEK),
        week_conversations=ledger.spent_per_conversation_since(session, user_id, now - WEEK),
        ring=min(max(fractions) if fractions else 0.0, 1.0),
        exhausted=exhausted,
        fallback_profile_id=fallback_id,
        fallback_name=(
            profile_name(session, fallback_id) if exhausted is not None and fallback_id else None
        ),
        extension_requests=bool(settings.usage_extension_requests),
        requests=ledger.user_requests(session, user_id),
        conversations=ledger.spent_per_conversation(session, user_id),
        models=ledger.spent_per_model(session, user_id),
    )


@dataclass(frozen=True)
class UsageBrief:
    """A user's two windows as the admin console lists them (USE-5)."""

    limits: Included
    session: Window
    week: Window
    exhausted: str | None


def user_usage_brief(
    session: Session | Connection, user_id: str, settings: Settings, now: datetime | None = None
) -> UsageBrief:
    """A user's two windows as the admin console lists them (USE-5)."""
    now = now or utcnow()
    limits, session_window, week_window = _windows(session, user_id, settings, now)
    exhausted = "session" if session_window.exhausted else "week" if week_window.exhausted else None
    return UsageBrief(limits, session_window, week_window, exhausted)


def check_can_spend(session: Session, user_id: str, settings: Settings, amount: float) -> None:
    """Refuses a paid action (manual compaction) when the included usage is used up."""
    if amount <= 0:
        return
    if exhausted_by(session, user_id, settings) is not None:
        raise InsufficientCredits()


@dataclass(frozen=True)
class ExtensionOutcome:
    """What "Request extension" did: ``notified`` the administrators now, or not (they
    already were, at ``requested_at``)."""

    notified: bool
    requested_at: datetime


def request_extension(session: Session, user_id: str, settings: Settings) -> ExtensionOutcome:
    """USE-3: notifies the administrators; refused (``forbidden``) where extension requests
    are switched off, so no request waits in the admin page for nobody to act on."""
    if not settings.usage_extension_requests:
        raise Forbidden("Extension requests are switched off on this server.")
    reason = exhausted_by(session, user_id, settings) or ""
    since = utcnow() - EXTENSION_REPEAT_WINDOW
    recent = ledger.last_extension_request(session, user_id, since)
    if recent is not None:
        return ExtensionOutcome(notified=False, requested_at=recent)
    requested = ledger.add_extension_request(session, user_id, reason)
    # Administrators who watch the log see it too; the admin page lists it (USE-5).
    log.info("user %s asks for more included usage (%s)", user_id, reason or "not used up")
    return ExtensionOutcome(notified=True, requested_at=requested)
