"""Reading model profiles (PROF-1): one frozen :class:`ProfileRecord` for every reader.

A profile is read as a record of its stored columns, whoever reads it: the profiles room
(:mod:`chatmem.models.profiles`: the API's views, the engine's and the client's), the turn
path and the context endpoint.  The ORM row (:class:`~chatmem.store.tables.profiles.
ModelProfile`) stays inside the writes.  The turn path's statements are built once and run
on the Core connection: they run at every turn step and every keystroke of the context
endpoint.

Visibility (STORE-1): a user may use their own profiles and every ``shared`` one; anything
else answers exactly like a missing id.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, bindparam, func, or_, select, update
from sqlalchemy.orm import Session

from chatmem.errors import NotFound
from chatmem.security.secret_box import SecretBox, profile_aad
from chatmem.store.db import connection_of
from chatmem.store.tables.conversations import Conversation
from chatmem.store.tables.profiles import ModelProfile
from chatmem.store.tables.runs import UsageRow
from chatmem.store.types import utcnow


@dataclass(frozen=True, slots=True)
class ProfileRecord:
    """A model profile as stored (every column of ``profiles``)."""

    id: str
    user_id: str | None
    shared: bool
    name: str
    base_url: str
    model: str
    api_key_ciphertext: bytes | None
    context_window: int
    answer_reserve: int | None  # None: the window's default (CTX-22)
    tokenizer: str
    input_price_per_mtok: float | None
    output_price_per_mtok: float | None
    free: bool
    stateless: bool
    accepts_images: bool
    #: PROJ-2: flat tokens per image (None: the provider's formula).
    image_tokens: int | None
    summarizer_profile_id: str | None
    # The memory knobs (CTX-22); None: the engine's default.
    economy_pairs: int | None
    economy_batch: int | None
    full_threshold_fraction: float | None
    full_threshold_cap: int | None
    full_keep_messages: int | None
    window_messages: int | None
    window_chars: int | None
    instructions_role: str | None
    #: Issue 17: the ``recall`` tool (None: the memory mode's default).
    recall: bool | None
    #: USE-4: the order Auto tries shared profiles in (None: never picked).
    auto_rank: int | None
    #: Issue 29: request parameters used when the client sent none / whatever it sent.
    request_defaults: dict[str, Any] | None
    request_pins: dict[str, Any] | None
    created_at: datetime
    updated_at: datetime

    def visible_to(self, user_id: str) -> bool:
        """Whether a user may use the profile: their own, or a shared one (STORE-1)."""
        return bool(self.shared or self.user_id == user_id)


#: The record's fields, which are the table's columns.
PROFILE_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(ProfileRecord))
if set(PROFILE_FIELDS) != {c.name for c in ModelProfile.__table__.c}:  # pragma: no cover
    raise RuntimeError("ProfileRecord must have exactly the columns of ModelProfile")

#: The columns to select for a record, in the record's order.
PROFILE_COLUMNS: tuple[Any, ...] = tuple(getattr(ModelProfile, name) for name in PROFILE_FIELDS)


def profile_record(row: ModelProfile) -> ProfileRecord:
    """The record of an ORM row (after a write)."""
    return ProfileRecord(*(getattr(row, name) for name in PROFILE_FIELDS))


def profile_from_columns(mapping: Mapping[Any, Any], prefix: str = "") -> ProfileRecord | None:
    """The record of a profile read with other columns under ``prefix`` + the column names
    (None when the outer join found no profile)."""
    if mapping[f"{prefix}id"] is None:
        return None
    return ProfileRecord(*(mapping[prefix + name] for name in PROFILE_FIELDS))


_PROFILE = select(*PROFILE_COLUMNS).where(ModelProfile.id == bindparam("pid"))


def profile_by_id(session: Session | Connection, profile_id: str) -> ProfileRecord | None:
    """The profile, whoever may use it (the caller checks: :meth:`ProfileRecord.visible_to`)."""
    row = connection_of(session).execute(_PROFILE, {"pid": profile_id}).first()
    return None if row is None else ProfileRecord(*row)


def visible_profile(
    session: Session | Connection, user_id: str, profile_id: str
) -> ProfileRecord | None:
    """The profile if the user may use it (their own or a shared one), else None."""
    record = profile_by_id(session, profile_id)
    return record if record is not None and record.visible_to(user_id) else None


def profile_visible(session: Session | Connection, user_id: str, profile_id: str) -> bool:
    """Whether ``profile_id`` names a profile this user may use; conversations refuse anything
    else with ``not_found`` (STORE-1).  "Auto" is always allowed (USE-4)."""
    if profile_id == AUTO_PROFILE:
        return True
    return visible_profile(session, user_id, profile_id) is not None


def visible_profiles(session: Session, user_id: str) -> list[ProfileRecord]:
    """The user's own profiles and the shared ones, shared first then by name."""
    rows = session.execute(
        select(*PROFILE_COLUMNS)
        .where(or_(ModelProfile.user_id == user_id, ModelProfile.shared.is_(True)))
        .order_by(ModelProfile.shared.desc(), ModelProfile.name, ModelProfile.created_at)
    )
    return [ProfileRecord(*row) for row in rows]


#: A conversation's ``profile_id`` when "Auto" chooses its model (USE-4).
AUTO_PROFILE = "auto"


def ranked_profiles(session: Session | Connection) -> list[ProfileRecord]:
    """USE-4: the shared profiles "Auto" may pick, best first (``auto_rank`` ascending, an
    administrator's setting; unranked ones are never picked).  Shared profiles are visible
    to every user (STORE-1)."""
    rows = connection_of(session).execute(
        select(*PROFILE_COLUMNS)
        .where(ModelProfile.shared.is_(True), ModelProfile.auto_rank.is_not(None))
        .order_by(ModelProfile.auto_rank, ModelProfile.name, ModelProfile.id)
    )
    return [ProfileRecord(*row) for row in rows]


def own_auto_profiles(session: Session | Connection, user_id: str) -> list[ProfileRecord]:
    """USE-4: the user's own profiles "Auto" picks from where an administrator ranked no
    shared one, best first: those the user ranked (``auto_rank`` ascending), then the rest,
    the one used last first (the newest ledger row; never used: the newest profile)."""
    last_used = (
        select(func.max(UsageRow.num))
        .where(UsageRow.profile_id == ModelProfile.id, UsageRow.user_id == user_id)
        .correlate(ModelProfile)
        .scalar_subquery()
    )
    rows = connection_of(session).execute(
        select(*PROFILE_COLUMNS)
        .where(ModelProfile.user_id == user_id, ModelProfile.shared.is_(False))
        .order_by(
            ModelProfile.auto_rank.is_(None),
            ModelProfile.auto_rank,
            last_used.is_(None),
            last_used.desc(),
            ModelProfile.created_at.desc(),
            ModelProfile.id,
        )
    )
    return [ProfileRecord(*row) for row in rows]


def auto_candidates(session: Session | Connection, user_id: str) -> list[ProfileRecord]:
    """USE-4: the profiles "Auto" may pick for this user, best first: the shared profiles an
    administrator ranked, else the user's own (:func:`own_auto_profiles`)."""
    return ranked_profiles(session) or own_auto_profiles(session, user_id)


def auto_planning_profile(session: Session | Connection, user_id: str) -> str | None:
    """The profile an "Auto" conversation is planned with where the user's usage plays no
    part (the history's statuses): the best candidate.  A turn and the memory window ask
    ``turns.answerer.resolve_auto_profile``, which also weighs the user's usage."""
    ranked = auto_candidates(session, user_id)
    return ranked[0].id if ranked else None


def shared_profiles(session: Session | Connection) -> list[ProfileRecord]:
    """Every shared profile in Auto's order (USE-4): ranked ones by rank, unranked last, then
    by name."""
    rows = connection_of(session).execute(
        select(*PROFILE_COLUMNS)
        .where(ModelProfile.shared.is_(True))
        .order_by(ModelProfile.auto_rank.is_(None), ModelProfile.auto_rank, ModelProfile.name)
    )
    return [ProfileRecord(*row) for row in rows]


# --- writes (the checks are the profiles room's, :mod:`chatmem.models.profiles`) ------------


def insert_profile(session: Session, values: Mapping[str, Any]) -> ProfileRecord:
    """A new profile with these column values (the rest: the table's defaults)."""
    row = ModelProfile(**values)
    session.add(row)
    session.flush()
    return profile_record(row)


def update_profile(session: Session, profile_id: str, values: Mapping[str, Any]) -> ProfileRecord:
    """The profile with these columns changed (``updated_at`` moves when any does)."""
    row = session.get(ModelProfile, profile_id)
    if row is None:
        raise NotFound("profile")
    for name, value in values.items():
        setattr(row, name, value)
    session.flush()
    return profile_record(row)


def set_auto_rank(session: Session, profile_id: str, auto_rank: int | None) -> ProfileRecord:
    """USE-4: a shared profile's place in Auto's order (None: never picked); a private or
    missing profile is :class:`NotFound`."""
    row = session.get(ModelProfile, profile_id)
    if row is None or not row.shared:
        raise NotFound("profile")
    row.auto_rank = auto_rank
    return profile_record(row)


def turn_recall_off(session: Session, profile_id: str) -> bool:
    """The profile's model server refused the ``recall`` tool it was offered by default (it
    takes no tools): its ``recall`` switch is set off — the profile page shows it, and plans
    stop counting the tool — unless somebody has set the switch.  Whether it changed."""
    changed = session.connection().execute(
        update(ModelProfile)
        .where(ModelProfile.id == profile_id, ModelProfile.recall.is_(None))
        .values(recall=False, updated_at=utcnow())
    )
    return bool(changed.rowcount)


def delete_profile(session: Session, profile_id: str) -> None:
    """Deletes the profile.  Conversations and summariser links keep plain ids: they are
    cleared so nothing dangles."""
    session.execute(
        update(Conversation).where(Conversation.profile_id == profile_id).values(profile_id=None)
    )
    session.execute(
        update(ModelProfile)
        .where(ModelProfile.summarizer_profile_id == profile_id)
        .values(summarizer_profile_id=None)
    )
    row = session.get(ModelProfile, profile_id)
    if row is not None:
        session.delete(row)
    session.flush()


def reencrypt_api_keys(session: Session, old: SecretBox, new: SecretBox) -> int:
    """PROF-3: every stored API key decrypted with ``old`` and encrypted with ``new`` (in the
    caller's one transaction); how many."""
    count = 0
    rows = session.scalars(select(ModelProfile).where(ModelProfile.api_key_ciphertext.is_not(None)))
    for row in rows:
        aad = profile_aad(row.id)
        assert row.api_key_ciphertext is not None
        row.api_key_ciphertext = new.encrypt(old.decrypt(row.api_key_ciphertext, aad), aad)
        count += 1
    return count
