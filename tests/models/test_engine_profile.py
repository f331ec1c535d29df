"""PROF-1, CTX-22: the engine's view of a profile — window, memory knobs, tokenizer, prices."""

from __future__ import annotations

from chatmem.context.prices import SNAPSHOT
from chatmem.context.values import Prices, Profile, default_answer_reserve
from chatmem.models.profiles import engine_profile
from chatmem.store.profiles import PROFILE_FIELDS, ProfileRecord, profile_from_columns
from chatmem.store.types import utcnow


def row(**extra: object) -> ProfileRecord:
    now = utcnow()
    fields: dict[str, object] = {
        **dict.fromkeys(PROFILE_FIELDS),
        "id": "p",
        "shared": False,
        "name": "n",
        "base_url": "https://api.openai.com/v1",
        "model": "gpt-4o-mini",
        "context_window": 128_000,
        "answer_reserve": 2_000,
        "tokenizer": "o200k_base",
        "free": False,
        "stateless": True,
        "accepts_images": False,
        "created_at": now,
        "updated_at": now,
        **extra,
    }
    return ProfileRecord(**fields)


def test_engine_profile_carries_the_memory_knobs_and_table_prices() -> None:
    profile = engine_profile(row())
    assert isinstance(profile, Profile)
    assert (profile.context_window, profile.answer_reserve, profile.tokenizer) == (
        128_000,
        2_000,
        "o200k_base",
    )
    assert profile.stateless is True and profile.model == "gpt-4o-mini"
    assert profile.prices is not None and profile.prices.input_per_mtok > 0
    assert profile.prices.output_per_mtok > profile.prices.input_per_mtok


def test_summarizer_prices_come_from_the_summarizer_profile() -> None:
    main = row(input_price_per_mtok=10.0, output_price_per_mtok=30.0)
    cheap = row(id="c", input_price_per_mtok=0.1, output_price_per_mtok=0.2)
    profile = engine_profile(main, cheap)
    assert profile.prices == Prices(10.0, 30.0)
    assert profile.summarizer_prices == Prices(0.1, 0.2)


def test_price_precedence_free_then_override_then_table_then_unknown() -> None:
    assert SNAPSHOT.resolve("gpt-4o", free=True, input_per_mtok=5.0).prices == Prices(
        0, 0, free=True
    )
    half = SNAPSHOT.resolve("gpt-4o", input_per_mtok=1.0)
    assert half.source == "override" and half.prices.input_per_mtok == 1.0
    assert half.prices.output_per_mtok == SNAPSHOT.resolve("gpt-4o").prices.output_per_mtok > 0
    assert SNAPSHOT.resolve("gpt-4o").source == "table"
    unknown = SNAPSHOT.resolve("totally-made-up-model-7b")
    assert unknown.source == "unknown" and unknown.prices == Prices(0.0, 0.0, free=False)


KNOBS = {
    "economy_pairs": 5,
    "economy_batch": 2,
    "full_threshold_fraction": 0.5,
    "full_threshold_cap": 50_000,
    "full_keep_messages": 8,
    "window_messages": 30,
    "window_chars": 20_000,
    "instructions_role": "developer",
}


def test_engine_profile_carries_every_stored_knob_and_the_summarizer_window() -> None:
    """CTX-22: the stored knobs reach the engine; CTX-21: so does the summariser's window."""
    cheap = row(id="c", context_window=8_192)
    profile = engine_profile(row(**KNOBS), cheap)
    assert {name: getattr(profile, name) for name in KNOBS} == KNOBS
    assert profile.summarizer_window == 8_192 and profile.summarizer_context == 8_192


def test_null_knobs_leave_the_engine_defaults_and_an_automatic_reserve() -> None:
    profile = engine_profile(row(context_window=8_192, answer_reserve=None))
    defaults = Profile(context_window=8_192)
    assert profile.answer_reserve == 1_024 == default_answer_reserve(8_192)
    assert {name: getattr(profile, name) for name in KNOBS} == {
        name: getattr(defaults, name) for name in KNOBS
    }
    assert profile.summarizer_window is None and profile.summarizer_context == 8_192


def test_a_profile_read_with_its_conversation_is_the_same_record() -> None:
    """The turn path reads the profile's columns with the conversation's (``p_`` + name): the
    same record, so the same engine profile; no profile joined is None."""
    stored = row(**KNOBS, answer_reserve=None)
    columns = {f"p_{name}": getattr(stored, name) for name in PROFILE_FIELDS}
    read = profile_from_columns({"mode": "full", **columns}, prefix="p_")
    assert read == stored
    assert read is not None
    profile = engine_profile(read, read)
    assert profile.economy_pairs == 5 and profile.answer_reserve == 4_096
    assert profile.summarizer_window == 128_000
    assert profile_from_columns({"p_id": None}, prefix="p_") is None
