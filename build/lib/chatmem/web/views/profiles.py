"""The API's shape of a model profile (PROF-1, SEC-4): never its key, only ``has_api_key``."""

from __future__ import annotations

from typing import Any

from chatmem.models.profiles import can_edit, effective_knobs, price_info
from chatmem.store.accounts import UserRecord
from chatmem.store.profiles import ProfileRecord
from chatmem.store.types import iso


def profile_view(row: ProfileRecord, user: UserRecord) -> dict[str, Any]:
    """The API shape of a profile: everything but the key, which is only ``has_api_key``.

    A shared profile seen by a user who may not edit it (SEC-4) shows what choosing and using
    it needs — name, model, window, tokenizer, stateless, prices, the request parameters it
    sets (issue 29: they change its answers) — and nothing of where it
    points or how it is configured: no ``base_url``, no ``has_api_key``, no knobs."""
    info = price_info(row)
    prices = {
        "input_per_mtok": info.prices.input_per_mtok,
        "output_per_mtok": info.prices.output_per_mtok,
        "free": info.prices.free,
        "source": info.source,
        "currency": "USD",
    }
    if not can_edit(row, user):
        return {
            "id": row.id,
            "name": row.name,
            "model": row.model,
            "context_window": row.context_window,
            "tokenizer": row.tokenizer,
            "free": row.free,
            "prices": prices,
            "stateless": row.stateless,
            "shared": row.shared,
            "auto_rank": row.auto_rank,  # USE-4: Auto's order (None: never picked)
            **request_options(row),
            "owned": False,
            "editable": False,
        }
    return {
        "id": row.id,
        "name": row.name,
        "base_url": row.base_url,
        "model": row.model,
        "has_api_key": row.api_key_ciphertext is not None,
        "context_window": row.context_window,
        **effective_knobs(row),
        "answer_reserve_auto": row.answer_reserve is None,
        "tokenizer": row.tokenizer,
        "input_price_per_mtok": row.input_price_per_mtok,
        "output_price_per_mtok": row.output_price_per_mtok,
        "free": row.free,
        "prices": prices,
        "stateless": row.stateless,
        "accepts_images": row.accepts_images,
        "summarizer_profile_id": row.summarizer_profile_id,
        # Issue 17: the recall tool as set (null: on in the economy and full modes).
        "recall": row.recall,
        "shared": row.shared,
        "auto_rank": row.auto_rank,  # USE-4: Auto's order (None: never picked)
        **request_options(row),
        "owned": row.user_id == user.id,
        "editable": True,
        "created_at": iso(row.created_at),
        "updated_at": iso(row.updated_at),
    }


def request_options(row: ProfileRecord) -> dict[str, Any]:
    """Issue 29: the profile's request parameters (``{}``: none), shown to whoever may use
    the profile — they change every answer it gives."""
    return {
        "request_defaults": dict(row.request_defaults or {}),
        "request_pins": dict(row.request_pins or {}),
    }
