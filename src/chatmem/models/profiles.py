"""The profile repository (PROF-1) and the views other rooms need of a profile.

* Visibility: a user sees their own profiles and every ``shared`` one (published by an
  admin); anything else answers exactly like a missing id (``NotFound``, STORE-1).  Only the
  owner changes a private profile; only admins change shared ones.
* Saving checks the base URL with the endpoint policy (PROF-4) and encrypts the API key with
  the profile id as associated data (PROF-2).  The key is write-only: :func:`public_view`
  says ``has_api_key`` and nothing more.
* :func:`engine_profile` is the context engine's view (window, reserve, tokenizer, prices);
  :func:`model_endpoint` is the client's (URL, model, decrypted key) — the only place a key
  is decrypted, right before a request.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from sqlalchemy import or_, select, update
from sqlalchemy.orm import Session

from chatmem.context.values import Profile
from chatmem.errors import Forbidden, InvalidInput, NotFound
from chatmem.models.client import ModelEndpoint
from chatmem.models.prices import PriceInfo, resolve_prices
from chatmem.models.secrets import SecretBox, profile_aad
from chatmem.models.ssrf import EndpointPolicy
from chatmem.store.engine import profile_visible_to
from chatmem.store.tables.accounts import User
from chatmem.store.tables.conversations import Conversation
from chatmem.store.tables.profiles import (
    ANSWER_RESERVE_DEFAULT,
    CONTEXT_WINDOW_DEFAULT,
    CONTEXT_WINDOW_MAX,
    CONTEXT_WINDOW_MIN,
    TOKENIZERS,
    ModelProfile,
)
from chatmem.store.types import iso, new_id

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
    "summarizer_profile_id",
    "shared",
)


# --- lookups -----------------------------------------------------------------------------------


def visible_profiles(session: Session, user: User) -> list[ModelProfile]:
    """The user's own profiles and the shared ones, shared first then by name."""
    rows = session.scalars(
        select(ModelProfile)
        .where(or_(ModelProfile.user_id == user.id, ModelProfile.shared.is_(True)))
        .order_by(ModelProfile.shared.desc(), ModelProfile.name, ModelProfile.created_at)
    )
    return list(rows)


def visible_profile(session: Session, user: User, profile_id: str) -> ModelProfile:
    row = session.get(ModelProfile, profile_id)
    if row is None or not profile_visible_to(row, user.id):
        raise NotFound("profile")
    return row


def editable_profile(session: Session, user: User, profile_id: str) -> ModelProfile:
    row = visible_profile(session, user, profile_id)
    if row.user_id != user.id and not (row.shared and user.is_admin):
        raise Forbidden("Only an administrator can change a shared profile.")
    return row


# --- writes ------------------------------------------------------------------------------------


def create_profile(
    session: Session,
    user: User,
    secrets: SecretBox,
    policy: EndpointPolicy,
    fields: Mapping[str, Any],
) -> ModelProfile:
    """Create a profile from ``fields`` (names as in :data:`EDITABLE`, plus ``api_key``)."""
    row = ModelProfile(
        id=new_id(),
        user_id=user.id,
        shared=False,
        context_window=CONTEXT_WINDOW_DEFAULT,
        answer_reserve=ANSWER_RESERVE_DEFAULT,
        tokenizer="estimate",
        free=False,
        stateless=False,
    )
    _apply(session, row, user, secrets, policy, fields, creating=True)
    session.add(row)
    session.flush()
    return row


def update_profile(
    session: Session,
    user: User,
    row: ModelProfile,
    secrets: SecretBox,
    policy: EndpointPolicy,
    changes: Mapping[str, Any],
) -> ModelProfile:
    """Apply a partial change.  ``api_key``: a string replaces it, ``None`` removes it."""
    _apply(session, row, user, secrets, policy, changes, creating=False)
    session.flush()
    return row


def delete_profile(session: Session, row: ModelProfile) -> None:
    # Conversations and summariser links keep plain ids; clear them so nothing dangles.
    session.execute(
        update(Conversation).where(Conversation.profile_id == row.id).values(profile_id=None)
    )
    session.execute(
        update(ModelProfile)
        .where(ModelProfile.summarizer_profile_id == row.id)
        .values(summarizer_profile_id=None)
    )
    session.delete(row)
    session.flush()


def _apply(
    session: Session,
    row: ModelProfile,
    user: User,
    secrets: SecretBox,
    policy: EndpointPolicy,
    fields: Mapping[str, Any],
    *,
    creating: bool,
) -> None:
    unknown = set(fields) - set(EDITABLE) - {"api_key"}
    if unknown:
        raise InvalidInput(f"unknown profile fields: {', '.join(sorted(unknown))}")
    if creating:
        for required in ("name", "base_url", "model"):
            if not fields.get(required):
                raise InvalidInput(f"{required}: required")
    for name in EDITABLE:
        if name in fields:
            value = fields[name]
            if name in ("name", "base_url", "model"):
                value = str(value or "").strip()
                if not value:
                    raise InvalidInput(f"{name}: must not be empty")
            setattr(row, name, value)
    if "shared" in fields and fields["shared"] and not user.is_admin:
        raise Forbidden("Only administrators can publish shared profiles.")
    _validate(session, user, row)
    if creating or "base_url" in fields:
        policy.check_url(row.base_url)
    if "api_key" in fields:
        key = fields["api_key"]
        key = key.strip() if isinstance(key, str) else None
        row.api_key_ciphertext = secrets.encrypt(key, profile_aad(row.id)) if key else None


def _validate(session: Session, user: User, row: ModelProfile) -> None:
    if not CONTEXT_WINDOW_MIN <= row.context_window <= CONTEXT_WINDOW_MAX:
        raise InvalidInput(
            f"context_window: must be between {CONTEXT_WINDOW_MIN:,} and {CONTEXT_WINDOW_MAX:,} tokens"
        )
    if not 0 <= row.answer_reserve <= row.context_window // 2:
        raise InvalidInput("answer_reserve: must be between 0 and half the context window")
    if row.tokenizer not in TOKENIZERS:
        raise InvalidInput(f"tokenizer: one of {', '.join(TOKENIZERS)}")
    for price in (row.input_price_per_mtok, row.output_price_per_mtok):
        if price is not None and price < 0:
            raise InvalidInput("prices must not be negative")
    if row.summarizer_profile_id is not None:
        if row.summarizer_profile_id == row.id:
            raise InvalidInput("summarizer_profile_id: a profile cannot summarise for itself")
        try:
            visible_profile(session, user, row.summarizer_profile_id)
        except NotFound:
            raise InvalidInput("summarizer_profile_id: no such profile") from None


# --- views -------------------------------------------------------------------------------------


def price_info(row: ModelProfile) -> PriceInfo:
    return resolve_prices(
        row.model,
        base_url=row.base_url,
        free=row.free,
        input_per_mtok=row.input_price_per_mtok,
        output_per_mtok=row.output_price_per_mtok,
    )


def engine_profile(row: ModelProfile, summarizer: ModelProfile | None = None) -> Profile:
    """The context engine's view of a profile (prices resolved: override, table, or free)."""
    prices = price_info(row).prices
    profile = Profile(
        context_window=row.context_window,
        answer_reserve=row.answer_reserve,
        tokenizer=row.tokenizer,
        stateless=row.stateless,
        model=row.model,
        prices=prices,
    )
    if summarizer is not None:
        profile = replace(profile, summarizer_prices=price_info(summarizer).prices)
    return profile


def decrypt_api_key(row: ModelProfile, secrets: SecretBox) -> str | None:
    return secrets.decrypt_optional(row.api_key_ciphertext, profile_aad(row.id))


def model_endpoint(row: ModelProfile, secrets: SecretBox) -> ModelEndpoint:
    """What :class:`~chatmem.models.client.ModelClient` needs, with the key decrypted."""
    return ModelEndpoint(row.base_url, row.model, decrypt_api_key(row, secrets))


def public_view(row: ModelProfile, user: User) -> dict[str, Any]:
    """The API shape of a profile: everything but the key, which is only ``has_api_key``."""
    info = price_info(row)
    return {
        "id": row.id,
        "name": row.name,
        "base_url": row.base_url,
        "model": row.model,
        "has_api_key": row.api_key_ciphertext is not None,
        "context_window": row.context_window,
        "answer_reserve": row.answer_reserve,
        "tokenizer": row.tokenizer,
        "input_price_per_mtok": row.input_price_per_mtok,
        "output_price_per_mtok": row.output_price_per_mtok,
        "free": row.free,
        "prices": {
            "input_per_mtok": info.prices.input_per_mtok,
            "output_per_mtok": info.prices.output_per_mtok,
            "free": info.prices.free,
            "source": info.source,
            "currency": "USD",
        },
        "stateless": row.stateless,
        "summarizer_profile_id": row.summarizer_profile_id,
        "shared": row.shared,
        "owned": row.user_id == user.id,
        "created_at": iso(row.created_at),
        "updated_at": iso(row.updated_at),
    }
