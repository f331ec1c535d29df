"""Event-loop helpers for tests of code that only yields to the loop (no I/O, no timers)."""

from __future__ import annotations

import asyncio


async def settle() -> None:
    """Lets every ready task run until all of them wait again (on an event, a lock, a gate):
    a few passes of the loop, none of them timed."""
    for _ in range(20):
        await asyncio.sleep(0)
