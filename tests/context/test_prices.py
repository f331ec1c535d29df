"""The one price rule (PROF-1, CTX-18): the models room and the plan read the same table."""

from __future__ import annotations

from chatmem.context.prices import SNAPSHOT, PriceTable, price_for
from chatmem.context.values import Prices, Profile


def test_table_figures_are_the_per_million_prices() -> None:
    assert SNAPSHOT.resolve("gpt-4o").prices == Prices(2.5, 10.0)
    assert SNAPSHOT.resolve("gpt-4o-mini").prices == Prices(0.15, 0.6)


def test_the_plan_and_the_models_room_price_a_model_alike() -> None:
    for model in ("gpt-4o", "gpt-4o-mini", "claude-sonnet-4-5", "gemini-1.5-flash"):
        assert price_for(Profile(model=model)) == SNAPSHOT.resolve(model).prices


def test_each_table_owns_its_cache() -> None:
    table = PriceTable(cache_size=4)
    assert table.lookup("gpt-4o", None) == SNAPSHOT.lookup("gpt-4o", None)
    assert table.lookup.cache_info().currsize == 1
    assert PriceTable().lookup.cache_info().currsize == 0
