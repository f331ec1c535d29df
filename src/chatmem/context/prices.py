"""Prices (CTX-18, PROF-1): a profile's own prices, else the genai-prices table, else free.

The genai-prices snapshot ships inside the package and is read lazily (it costs a third of a
second to import and needs no network).  A lookup uses the base tier of the model's price:
the request size tiers some providers have start far above ordinary chat requests.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from chatmem.context.values import Prices, Profile

FREE = Prices(free=True)

# Usage that stays in every provider's base price tier; the result is scaled to per-million.
_PROBE_TOKENS = 1_000


@dataclass(frozen=True)
class PriceEstimate:
    """What the next request will cost (the answer is extra), and the compaction if any."""

    next_request: float
    compaction: float = 0.0
    currency: str = "USD"
    free: bool = False


@functools.lru_cache(maxsize=256)
def lookup_prices(model: str) -> Prices | None:
    """Per-million prices of ``model`` from the genai-prices snapshot, or None if unknown."""
    try:
        from genai_prices import Usage, calc_price
    except ImportError:  # pragma: no cover - a declared dependency
        return None
    try:
        calc = calc_price(Usage(input_tokens=_PROBE_TOKENS, output_tokens=_PROBE_TOKENS), model)
    except LookupError:
        return None
    scale = 1_000_000 / _PROBE_TOKENS
    return Prices(
        input_per_mtok=float(calc.input_price) * scale,
        output_per_mtok=float(calc.output_price) * scale,
    )


def price_for(profile: Profile) -> Prices:
    """The prices that apply to ``profile``: its own, else looked up by model, else free."""
    if profile.prices is not None:
        return profile.prices
    if profile.model:
        found = lookup_prices(profile.model)
        if found is not None:
            return found
    return FREE


def summarizer_price_for(profile: Profile) -> Prices:
    """CTX-9: the summariser may be a cheaper profile; default: the profile's own prices."""
    return (
        profile.summarizer_prices if profile.summarizer_prices is not None else price_for(profile)
    )


def cost(tokens: int, per_mtok: float) -> float:
    """USD for ``tokens`` at ``per_mtok``, rounded to a millionth of a cent for stable output."""
    return round(tokens * per_mtok / 1_000_000, 8)
