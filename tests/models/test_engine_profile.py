"""PROF-1: the engine's view of a profile — window, reserve, tokenizer, resolved prices."""

from __future__ import annotations

from chatmem.context.values import Prices, Profile
from chatmem.models.prices import resolve_prices
from chatmem.models.profiles import engine_profile
from chatmem.store.tables.profiles import ModelProfile


def row(**extra: object) -> ModelProfile:
    fields: dict[str, object] = {
        "id": "p",
        "name": "n",
        "base_url": "https://api.openai.com/v1",
        "model": "gpt-4o-mini",
        "context_window": 128_000,
        "answer_reserve": 2_000,
        "tokenizer": "o200k_base",
        "free": False,
        "stateless": True,
        **extra,
    }
    return ModelProfile(**fields)


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
    assert resolve_prices("gpt-4o", free=True, input_per_mtok=5.0).prices == Prices(0, 0, free=True)
    half = resolve_prices("gpt-4o", input_per_mtok=1.0)
    assert half.source == "override" and half.prices.input_per_mtok == 1.0
    assert half.prices.output_per_mtok == resolve_prices("gpt-4o").prices.output_per_mtok > 0
    assert resolve_prices("gpt-4o").source == "table"
    unknown = resolve_prices("totally-made-up-model-7b")
    assert unknown.source == "unknown" and unknown.prices == Prices(0.0, 0.0, free=False)
