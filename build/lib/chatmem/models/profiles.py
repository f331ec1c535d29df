"""The profile repository (PROF-1) and the views other rooms need of a profile.

* Visibility: a user sees their own profiles and every ``shared`` one (published by an
  admin); anything else answers exactly like a missing id (``NotFound``, STORE-1).  Only the
  owner changes a private profile; only admins change shared ones.
* Saving checks the base URL with the endpoint policy (PROF-4) and encrypts the API key with
  the profile id as associated data (PROF-2).  The key is write-only: the API's view
  (``chatmem.web.views.profiles``) says ``has_api_key`` and nothing more.
* The memory knobs (CTX-22) are stored NULL until set, meaning "the engine's default"
  (:data:`KNOB_RANGES` lists them with their accepted ranges; ``instructions_role`` is one of
  :data:`INSTRUCTIONS_ROLES`).  A NULL ``answer_reserve`` follows the window
  (:func:`~chatmem.context.values.default_answer_reserve`); an explicit null in a change
  returns a knob to its default.  :func:`effective_knobs` are the values the API shows.
* :func:`engine_profile` is the context engine's view (window, knobs, tokenizer, prices,
  the summariser's window); :func:`model_endpoint` is the client's (URL, model, decrypted
  key) — the only place a key is decrypted, right before a request.

Every view reads a :class:`~chatmem.store.profiles.ProfileRecord` (loaded by
:mod:`chatmem.store.profiles`); a write checks every change here, then hands the columns to
the store, which answers with the record as written.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import fields as dataclass_fields
from typing import Any

from chatmem.context.prices import MAX_PRICE_PER_MTOK, SNAPSHOT, PriceInfo, valid_price
from chatmem.context.values import INSTRUCTIONS_ROLES, Profile, default_answer_reserve
from chatmem.errors import Forbidden, InvalidInput, NotFound
from chatmem.models.client import ModelEndpoint
from chatmem.models.request_options import checked_profile_options
from chatmem.security.endpoints import EndpointPolicy
from chatmem.security.secret_box import SecretBox, profile_aad
from chatmem.store import profiles as store
from chatmem.store.accounts import UserRecord
from chatmem.store.conversations import ConversationRecord
from chatmem.store.profiles import ProfileRecord
from chatmem.store.sessions import Session
from chatmem.store.tables.profiles import (
    CONTEXT_WINDOW_DEFAULT,
    CONTEXT_WINDOW_MAX,
    CONTEXT_WINDOW_MIN,
    TOKENIZERS,
)
from chatmem.store.types import new_id

EDITABLE = (
    "name",
    "base_url",
    "model",
    "context_window",
    "answer_reserve",
    "tokenizer",
    "input_price_per_mtok",
    "output_price_per_mtok",
    "free",
    "stateless",
    "accepts_images",
    "summarizer_profile_id",
    "shared",
    "economy_pairs",
    "economy_batch",
    "full_threshold_fraction",
    "full_threshold_cap",
    "full_keep_messages",
    "window_messages",
    "window_chars",
    "instructions_role",
    "recall",
    "image_tokens",
    "auto_rank",  # USE-4: Auto's order among the user's own profiles (or an admin's, shared)
    "request_defaults",  # issue 29: request parameters when the client sent none
    "request_pins",  # ... and whatever it sent
)

#: CTX-22: the numeric memory knobs and the ranges a profile may set (inclusive).  The answer
#: reserve is bounded by the window instead: 0 … half of it.
KNOB_RANGES: Mapping[str, tuple[int | float, int | float]] = {
    "economy_pairs": (0, 100),  # K, question–answer pairs kept verbatim (CTX-4)
    "economy_batch": (1, 100),  # B, pairs folded into the summary at once (CTX-4)
    "full_threshold_fraction": (0.1, 1.0),  # of the window (CTX-5)
    "full_threshold_cap": (1_000, 1_000_000),  # tokens (CTX-5)
    "full_keep_messages": (0, 1_000),  # CTX-5
    "window_messages": (1, 1_000),  # N (CTX-6)
    "window_chars": (100, 1_000_000),  # C (CTX-6)
    "image_tokens": (0, 100_000),  # flat tokens per image (PROJ-2); null: the formula
}
#: The knobs a NULL column leaves to the engine's fixed default (the answer reserve, whose
#: default follows the window, is kept apart).
KNOBS: tuple[str, ...] = (*KNOB_RANGES, "instructions_role")
#: Issue 29: the request parameters a profile sets (``chatmem.models.request_options``).
REQUEST_OPTION_FIELDS = ("request_defaults", "request_pins")
#: The engine's defaults, read from its :class:`Profile` so the two never disagree.
KNOB_DEFAULTS: Mapping[str, Any] = {
    f.name: f.default for f in dataclass_fields(Profile) if f.name in KNOBS
}


# --- lookups -----------------------------------------------------------------------------------


def visible_profile(session: Session, user: UserRecord, profile_id: str) -> ProfileRecord:
    record = store.visible_profile(session, user.id, profile_id)
    if record is None:
        raise NotFound("profile")
    return record


def can_edit(row: ProfileRecord, user: UserRecord) -> bool:
    """The owner, or an administrator for a shared profile: who may change it and see all of
    it (its endpoint included, SEC-4)."""
    return row.user_id == user.id or bool(row.shared and user.is_admin)


def editable_profile(session: Session, user: UserRecord, profile_id: str) -> ProfileRecord:
    """The profile to change or delete: one the user may use and edit."""
    record = store.visible_profile(session, user.id, profile_id)
    if record is None:
        raise NotFound("profile")
    if not can_edit(record, user):
        raise Forbidden("Only an administrator can change a shared profile.")
    return record


def engine_profile_for(session: Session, conversation: ConversationRecord) -> Profile:
    """The engine profile for the conversation's model profile (with its summariser's
    prices); the default :class:`Profile` when the conversation has none or it is no longer
    visible to the conversation's owner."""
    profile_id = conversation.profile_id
    if profile_id == store.AUTO_PROFILE:
        profile_id = store.auto_planning_profile(session, conversation.user_id)  # USE-4
    if profile_id is None:
        return Profile()
    record = store.visible_profile(session, conversation.user_id, profile_id)
    if record is None:
        return Profile()
    summarizer = None
    if record.summarizer_profile_id:
        summarizer = store.visible_profile(
            session, conversation.user_id, record.summarizer_profile_id
        )
    return engine_profile(record, summarizer)


# --- writes ------------------------------------------------------------------------------------


def create_profile(
    session: Session,
    user: UserRecord,
    secrets: SecretBox,
    policy: EndpointPolicy,
    fields: Mapping[str, Any],
) -> ProfileRecord:
    """Create a profile from ``fields`` (names as in :data:`EDITABLE`, plus ``api_key``)."""
    initial: dict[str, Any] = {
        **dict.fromkeys(EDITABLE),
        "id": new_id(),
        "user_id": user.id,
        "shared": False,
        "context_window": CONTEXT_WINDOW_DEFAULT,
        "answer_reserve": None,  # automatic: follows the window (CTX-22)
        "tokenizer": "estimate",
        "free": False,
        "stateless": False,
        "accepts_images": False,
    }
    values = _checked(session, initial, user, secrets, policy, fields, creating=True)
    return store.insert_profile(session, {**initial, **values})


def update_profile(
    session: Session,
    user: UserRecord,
    row: ProfileRecord,
    secrets: SecretBox,
    policy: EndpointPolicy,
    changes: Mapping[str, Any],
) -> ProfileRecord:
    """Apply a partial change.  ``api_key``: a string replaces it, ``None`` removes it."""
    before = {name: getattr(row, name) for name in ("id", *EDITABLE)}
    values = _checked(session, before, user, secrets, policy, changes, creating=False)
    return store.update_profile(session, row.id, values)


def _checked(
    session: Session,
    row: Mapping[str, Any],
    user: UserRecord,
    secrets: SecretBox,
    policy: EndpointPolicy,
    fields: Mapping[str, Any],
    *,
    creating: bool,
) -> dict[str, Any]:
    """Every change checked against the profile as it would be (``row``: its id and editable
    values now); the columns to write.  A refused change writes nothing."""
    unknown = set(fields) - set(EDITABLE) - {"api_key"}
    if unknown:
        raise InvalidInput(f"unknown profile fields: {', '.join(sorted(unknown))}")
    if creating:
        for required in ("name", "base_url", "model"):
            if not fields.get(required):
                raise InvalidInput(f"{required}: required")
    changes: dict[str, Any] = {}
    for name in EDITABLE:
        if name in fields:
            value = fields[name]
            if name in ("name", "base_url", "model"):
                value = str(value or "").strip()
                if not value:
                    raise InvalidInput(f"{name}: must not be empty")
            if name in REQUEST_OPTION_FIELDS:
                value = checked_profile_options(name, value)
            changes[name] = value
    if changes.get("shared") and not user.is_admin:
        raise Forbidden("Only administrators can publish shared profiles.")
    after = {**{n: row[n] for n in EDITABLE}, **changes}
    _validate(session, user, row["id"], after)
    if creating or "base_url" in fields:
        policy.check_url(after["base_url"])
    if "api_key" in fields:
        key = fields["api_key"]
        key = key.strip() if isinstance(key, str) else None
        changes["api_key_ciphertext"] = (
            secrets.encrypt(key, profile_aad(row["id"])) if key else None
        )
    return changes


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _validate(session: Session, user: UserRecord, profile_id: str, row: Mapping[str, Any]) -> None:
    """The profile's editable values as they would be after a change (``row``), checked."""
    window = row["context_window"]
    if not _whole(window) or not CONTEXT_WINDOW_MIN <= window <= CONTEXT_WINDOW_MAX:
        raise InvalidInput(
            f"context_window: must be between {CONTEXT_WINDOW_MIN:,} and {CONTEXT_WINDOW_MAX:,} tokens"
        )
    # Checked against the window as it will be, so shrinking the window can refuse a reserve.
    reserve = row["answer_reserve"]
    if reserve is not None and (not _whole(reserve) or not 0 <= reserve <= window // 2):
        raise InvalidInput(
            f"answer_reserve: must be between 0 and {window // 2:,} tokens (half the context "
            "window), or empty for the automatic reserve"
        )
    _validate_knobs(row)
    if row["tokenizer"] not in TOKENIZERS:
        raise InvalidInput(f"tokenizer: one of {', '.join(TOKENIZERS)}")
    for name in ("input_price_per_mtok", "output_price_per_mtok"):
        price = row[name]
        if price is not None and not valid_price(price):
            raise InvalidInput(
                f"{name}: must be a number from 0 to {MAX_PRICE_PER_MTOK:,.0f} (USD per "
                "million tokens)"
            )
    summarizer = row["summarizer_profile_id"]
    if summarizer is not None:
        if summarizer == profile_id:
            raise InvalidInput("summarizer_profile_id: a profile cannot summarise for itself")
        if not store.profile_visible(session, user.id, summarizer):
            raise InvalidInput("summarizer_profile_id: no such profile")


def _validate_knobs(row: Mapping[str, Any]) -> None:
    """CTX-22: each knob NULL (the default) or within :data:`KNOB_RANGES`."""
    for name, (low, high) in KNOB_RANGES.items():
        value = row[name]
        if value is None:
            continue
        if isinstance(low, float):
            ok = (
                isinstance(value, (int, float))
                and not isinstance(value, bool)
                and math.isfinite(value)
                and low <= value <= high
            )
            if not ok:
                raise InvalidInput(f"{name}: must be a number between {low:g} and {high:g}")
        elif not _whole(value) or not low <= value <= high:
            raise InvalidInput(f"{name}: must be a whole number between {low:,} and {high:,}")
    role = row["instructions_role"]
    if role is not None and role not in INSTRUCTIONS_ROLES:
        raise InvalidInput(f"instructions_role: one of {', '.join(INSTRUCTIONS_ROLES)}")


# --- views -------------------------------------------------------------------------------------


def price_info(row: ProfileRecord) -> PriceInfo:
    """The profile's prices by the one price rule (:mod:`chatmem.context.prices`)."""
    return SNAPSHOT.resolve(
        row.model,
        base_url=row.base_url,
        free=row.free,
        input_per_mtok=row.input_price_per_mtok,
        output_per_mtok=row.output_price_per_mtok,
    )


def engine_profile(row: ProfileRecord, summarizer: ProfileRecord | None = None) -> Profile:
    """The context engine's view of a profile (prices resolved: override, table, or free),
    with its memory knobs (a NULL knob leaves the engine's default) and, given a summariser
    profile, its prices and window."""
    knobs = {name: value for name in KNOBS if (value := getattr(row, name)) is not None}
    extra: dict[str, Any] = {}
    if summarizer is not None:
        extra = {
            "summarizer_prices": price_info(summarizer).prices,
            "summarizer_window": summarizer.context_window,
        }
    return Profile(
        context_window=row.context_window,
        # NULL: the window's default (CTX-22)
        answer_reserve=_or(row.answer_reserve, default_answer_reserve(row.context_window)),
        tokenizer=row.tokenizer,
        stateless=row.stateless,
        accepts_images=row.accepts_images,  # PROJ-2
        model=row.model,
        prices=price_info(row).prices,
        **knobs,
        **extra,
    )


def effective_knobs(row: ProfileRecord) -> dict[str, Any]:
    """Every knob as the engine uses it: the stored value, or the default when NULL."""
    out = {name: _or(getattr(row, name), KNOB_DEFAULTS[name]) for name in KNOBS}
    out["answer_reserve"] = _or(row.answer_reserve, default_answer_reserve(row.context_window))
    return out


def _or(value: Any, default: Any) -> Any:
    return default if value is None else value


def decrypt_api_key(row: ProfileRecord, secrets: SecretBox) -> str | None:
    return secrets.decrypt_optional(row.api_key_ciphertext, profile_aad(row.id))


def model_endpoint(
    row: ProfileRecord, secrets: SecretBox, *, conceal: bool = False
) -> ModelEndpoint:
    """What :class:`~chatmem.models.client.ModelClient` needs, with the key decrypted.
    ``conceal``: the call is for somebody who may not see the endpoint (another user of a
    shared profile): its errors name neither URL nor host (SEC-4)."""
    return ModelEndpoint(row.base_url, row.model, decrypt_api_key(row, secrets), conceal=conceal)
