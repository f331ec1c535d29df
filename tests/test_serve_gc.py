"""``chatmem serve``: what start-up loaded is kept out of the garbage collector's full
collections while the server runs (``frozen_after_startup``), and given back when it stops."""

from __future__ import annotations

import gc
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from chatmem.cli.serve import frozen_after_startup


async def test_what_start_up_made_is_frozen_while_serving_and_given_back_after() -> None:
    made: list[object] = []

    @asynccontextmanager
    async def lifespan(app: Any) -> AsyncIterator[dict[str, str]]:
        made.append({"loaded": ["at", "start-up"]})
        yield {"state": "ready"}

    assert gc.get_freeze_count() == 0
    async with frozen_after_startup(lifespan)(object()) as state:
        assert state == {"state": "ready"}
        assert made
        assert gc.get_freeze_count() > 0
        # Out of the collector's generations: a full collection does not walk it.
        assert not any(obj is made[0] for obj in gc.get_objects())
    assert gc.get_freeze_count() == 0
