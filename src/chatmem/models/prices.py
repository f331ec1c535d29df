"""Prices per million tokens for a profile (PROF-1, CTX-17): override, table, or free.

Precedence: a profile marked ``free`` costs nothing; explicit per-profile prices win (either
side may be overridden alone); otherwise the model id is looked up in ``genai-prices`` (a
maintained table shipped as a package snapshot — nothing is downloaded at run time), first
with the profile's base URL to pick the right provider, then by model id alone.  A model the
table does not know is treated as free but reported with ``source="unknown"`` so the UI can say
the cost is not known rather than pretend it is zero.

An override is a number from 0 to :data:`MAX_PRICE_PER_MTOK` (SEC-1: ``1e999`` would make
every price and usage total Infinity); one stored outside that range by an older version is
ignored as if unset.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Literal

from chatmem.context.values import Prices

PriceSource = Literal["free", "override", "table", "unknown"]

#: The highest price a profile may set, in USD per million tokens (the dearest models today
#: cost a few hundred).
MAX_PRICE_PER_MTOK = 10_000.0


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


@functools.lru_cache(maxsize=512)
def table_prices(model: str, base_url: str | None = None) -> tuple[float, float] | None:
    """(input, output) USD per million tokens from genai-prices, or ``None`` if unknown."""
    from genai_prices import Usage, calc_price

    usage = Usage(input_tokens=1_000_000, output_tokens=1_000_000)
    for url in (base_url, None) if base_url else (None,):
        try:
            result = calc_price(usage, model, provider_api_url=url)
        except (LookupError, ValueError):
            continue
        return float(result.input_price), float(result.output_price)
    return None


def resolve_prices(
    model: str,
    *,
    base_url: str | None = None,
    free: bool = False,
    input_per_mtok: float | None = None,
    output_per_mtok: float | None = None,
) -> PriceInfo:
    if free:
        return PriceInfo(Prices(0.0, 0.0, free=True), "free")
    if input_per_mtok is not None and not valid_price(input_per_mtok):
        input_per_mtok = None
    if output_per_mtok is not None and not valid_price(output_per_mtok):
        output_per_mtok = None
    looked_up = None
    if input_per_mtok is None or output_per_mtok is None:
        looked_up = table_prices(model, base_url)
    if input_per_mtok is not None or output_per_mtok is not None:
        base = looked_up or (0.0, 0.0)
        return PriceInfo(
            Prices(
                input_per_mtok if input_per_mtok is not None else base[0],
                output_per_mtok if output_per_mtok is not None else base[1],
            ),
            "override",
        )
    if looked_up is not None:
        return PriceInfo(Prices(*looked_up), "table")
    return PriceInfo(Prices(0.0, 0.0, free=False), "unknown")
