"""Who answers a turn (USE-3, USE-4): the conversation's chosen profile, unless the included
usage is used up — then the configured fallback (the run records it: ``answered_by``, reason
``credits_exhausted``; a free profile may still answer when no fallback is configured, a paid
one is refused with ``insufficient_credits``) — or "Auto", which picks the best profile the
user may use now: the shared one with the lowest ``auto_rank`` an administrator set, else the
user's own (their ranking, else the one used last), or the fallback while the included usage
is used up.  The memory window and the prices plan on the same answer
(:func:`planned_answerer`).  How much is used up is :mod:`chatmem.turns.usage`'s.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from chatmem.errors import InsufficientCredits, InvalidInput
from chatmem.settings import Settings
from chatmem.store.ledger import profile_name
from chatmem.store.profiles import AUTO_PROFILE, ProfileRecord, auto_candidates, visible_profile
from chatmem.store.sessions import Connection, Session
from chatmem.turns.usage import Included, exhausted_by, included_usage

#: The conversation's ``profile_id`` when Auto chooses (USE-4).
AUTO = AUTO_PROFILE
#: Why a turn was answered by another profile than the one chosen (``runs.answered_reason``),
#: as the feed says it.
REASON_NOTES = {
    "credits_exhausted": "Answered by {name}: credits exhausted",
    "auto": "Answered by {name} (Auto)",
}


@dataclass(frozen=True)
class Answerer:
    """The profile that answers a turn, and why it is not the one chosen (None: it is)."""

    profile_id: str | None
    reason: str | None = None
    name: str | None = None

    def public(self) -> dict[str, Any]:
        """As the feed shows it: ``note`` is "Answered by basic: credits exhausted"."""
        note = REASON_NOTES[self.reason].format(name=self.name) if self.reason else None
        return {
            "profile_id": self.profile_id,
            "name": self.name,
            "reason": self.reason,
            "note": note,
        }


def _is_free(profile: ProfileRecord) -> bool:
    return bool(profile.free) or not (profile.input_price_per_mtok or profile.output_price_per_mtok)


def resolve_auto_profile(
    session: Session | Connection,
    user_id: str,
    settings: Settings,
    now: datetime | None = None,
) -> Answerer:
    """USE-4: the best profile this user may use now for "Auto" — the shared profile with the
    lowest ``auto_rank`` (an administrator's setting), or where none is ranked the user's own
    best (their ranking, else the one used last); while the user's included usage is used
    up, the fallback (or else the best free candidate).  Raises :class:`InvalidInput` when
    there is none.  The reason of the answer is ``auto``, or ``credits_exhausted`` when the
    usage made the choice."""
    exhausted = exhausted_by(session, user_id, settings, now) is not None
    ranked = auto_candidates(session, user_id)
    if exhausted:
        fallback = settings.usage_fallback_profile_id
        record = visible_profile(session, user_id, fallback) if fallback else None
        if record is None:
            record = next((p for p in ranked if _is_free(p)), None)
        if record is None:
            raise InsufficientCredits(
                "Credits exhausted, and no model is left for Auto: ask an administrator."
            )
        return Answerer(record.id, "credits_exhausted", record.name)
    if not ranked:
        raise InvalidInput(
            "Auto has no model to choose from: add a model profile on the Models page."
            " Administrators may also rank shared profiles for Auto."
        )
    return Answerer(ranked[0].id, "auto", ranked[0].name)


def chosen_answerer(
    session: Session | Connection,
    user_id: str,
    chosen: str | None,
    own: tuple[float | None, float | None],
    settings: Settings,
) -> Answerer:
    """:func:`answering_profile` for a conversation's choice, the user's own limits (``own``)
    read with the conversation (``store.engine.step_conversation``)."""
    limits = included_usage(session, user_id, settings, own=own)
    return answering_profile(session, user_id, chosen, settings, limits=limits)


def answering_profile(
    session: Session | Connection,
    user_id: str,
    chosen: str | None,
    settings: Settings,
    now: datetime | None = None,
    *,
    limits: Included | None = None,
) -> Answerer:
    """Which profile answers a turn on ``chosen`` (the conversation's profile id, ``auto`` or
    None): see the module docstring.  Enforced by the server, whatever the client shows."""
    if chosen == AUTO:
        return resolve_auto_profile(session, user_id, settings, now)
    if chosen is None or exhausted_by(session, user_id, settings, now, limits=limits) is None:
        return Answerer(chosen)
    fallback = settings.usage_fallback_profile_id
    if chosen == fallback:
        return Answerer(chosen)
    if fallback and visible_profile(session, user_id, fallback) is not None:
        return Answerer(fallback, "credits_exhausted", profile_name(session, fallback))
    record = visible_profile(session, user_id, chosen)
    if record is not None and _is_free(record):
        return Answerer(chosen)
    raise InsufficientCredits(
        "Credits exhausted: this model is locked until the included usage resets."
    )


def planned_answerer(
    session: Session | Connection, user_id: str, chosen: str | None, settings: Settings
) -> Answerer:
    """Who answers the next turn, for what is shown before it is sent (the memory window, the
    counter, the prices: CTX-17, CTX-18, CTX-11): :func:`answering_profile`, except that a
    turn it would refuse is planned on the chat's own choice (the refusal comes on sending)."""
    try:
        return answering_profile(session, user_id, chosen, settings)
    except (InvalidInput, InsufficientCredits):
        return Answerer(chosen)
