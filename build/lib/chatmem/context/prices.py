"""Prices per million tokens (PROF-1, CTX-17, CTX-18): the one price rule.

Precedence, for a profile of the models room (:meth:`PriceTable.resolve`) and for the plan
(:func:`price_for`) alike:

1. a profile marked ``free`` costs nothing (source ``free``);
2. explicit per-profile prices win, either side alone (source ``override``); the other side
   comes from the table, else 0;
3. otherwise the model id is looked up in ``genai-prices`` (:meth:`PriceTable.lookup`, source
   ``table``), first with the profile's base URL to pick the right provider, then by model id
   alone;
4. a model the table does not know costs nothing but says ``unknown``, so the UI can say the
   cost is not known rather than pretend it is zero.  The plan's engine-only profile
   (:class:`~chatmem.context.values.Profile` without prices) calls it free.

The table is the genai-prices snapshot shipped inside the package: nothing is downloaded at
run time, and it is read lazily (importing it costs a third of a second).  A lookup prices a
request of :data:`PROBE_TOKENS` input and output tokens and reads the price per million from
it.  The snapshot never changes while the process runs, so one :class:`PriceTable`
(:data:`SNAPSHOT`) serves every caller; its cache is its own.

An override is a number from 0 to :data:`MAX_PRICE_PER_MTOK` (SEC-1: ``1e999`` would make
every price and usage total Infinity); one stored outside that range by an older version is
ignored as if unset.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Literal

from chatmem.context.values import Prices, Profile

PriceSource = Literal["free", "override", "table", "unknown"]

#: The highest price a profile may set, in USD per million tokens (the dearest models today
#: cost a few hundred).
MAX_PRICE_PER_MTOK = 10_000.0

#: The request size a table lookup prices, in input and in output tokens.
PROBE_TOKENS = 1_000_000

FREE = Prices(free=True)


def valid_price(value: object) -> bool:
    """A price override is a finite number from 0 to :data:`MAX_PRICE_PER_MTOK`."""
    return (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and math.isfinite(value)
        and 0 <= value <= MAX_PRICE_PER_MTOK
    )


@dataclass(frozen=True)
class PriceInfo:
    prices: Prices
    source: PriceSource


@dataclass(frozen=True)
class PriceEstimate:
    """What the next request will cost (the answer is extra), and the compaction if any."""

    next_request: float
    compaction: float = 0.0
    currency: str = "USD"
    free: bool = False


def _table_prices(model: str, base_url: str | None) -> Prices | None:
    """Rule 3 uncached: the snapshot's prices of ``model``, or None when it does not know it."""
    from genai_prices import Usage, calc_price

    usage = Usage(input_tokens=PROBE_TOKENS, output_tokens=PROBE_TOKENS)
    scale = 1_000_000 / PROBE_TOKENS
    for url in (base_url, None) if base_url else (None,):
        try:
            result = calc_price(usage, model, provider_api_url=url)
        except (LookupError, ValueError):
            continue
        return Prices(float(result.input_price) * scale, float(result.output_price) * scale)
    return None


class PriceTable:
    """The genai-prices snapshot as the price rule reads it, with its own bounded cache of
    lookups (a model id and base URL, up to ``cache_size`` of them)."""

    def __init__(self, cache_size: int = 512) -> None:
        self.lookup = functools.lru_cache(maxsize=cache_size)(_table_prices)

    def resolve(
        self,
        model: str,
        *,
        base_url: str | None = None,
        free: bool = False,
        input_per_mtok: float | None = None,
        output_per_mtok: float | None = None,
    ) -> PriceInfo:
        """The prices of a stored profile and where they come from (rules 1 to 4)."""
        if free:
            return PriceInfo(Prices(0.0, 0.0, free=True), "free")
        if input_per_mtok is not None and not valid_price(input_per_mtok):
            input_per_mtok = None
        if output_per_mtok is not None and not valid_price(output_per_mtok):
            output_per_mtok = None
        looked_up = None
        if input_per_mtok is None or output_per_mtok is None:
            looked_up = self.lookup(model, base_url)
        if input_per_mtok is not None or output_per_mtok is not None:
            base = looked_up or Prices()
            return PriceInfo(
                Prices(
                    input_per_mtok if input_per_mtok is not None else base.input_per_mtok,
                    output_per_mtok if output_per_mtok is not None else base.output_per_mtok,
                ),
                "override",
            )
        if looked_up is not None:
            return PriceInfo(looked_up, "table")
        return PriceInfo(Prices(0.0, 0.0, free=False), "unknown")

    def for_profile(self, profile: Profile) -> Prices:
        """The prices that apply to an engine profile: its own, else looked up by model, else
        free."""
        if profile.prices is not None:
            return profile.prices
        if profile.model:
            found = self.lookup(profile.model, None)
            if found is not None:
                return found
        return FREE


#: The table of the snapshot this process ships with.
SNAPSHOT = PriceTable()


def price_for(profile: Profile, table: PriceTable = SNAPSHOT) -> Prices:
    """The prices that apply to ``profile`` (:meth:`PriceTable.for_profile`)."""
    return table.for_profile(profile)


def summarizer_price_for(profile: Profile, table: PriceTable = SNAPSHOT) -> Prices:
    """CTX-9: the summariser may be a cheaper profile; default: the profile's own prices."""
    if profile.summarizer_prices is not None:
        return profile.summarizer_prices
    return table.for_profile(profile)


def cost(tokens: int, per_mtok: float) -> float:
    """USD for ``tokens`` at ``per_mtok``, rounded to a millionth of a cent for stable output."""
    return round(tokens * per_mtok / 1_000_000, 8)
