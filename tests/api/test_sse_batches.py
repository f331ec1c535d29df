"""``web.sse.batches``: what waits leaves together, silence becomes a keep-alive, and the
pump stops with the consumer — the pacing both the run events and ``/v1`` streams use."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import pytest

from chatmem.turns.events import Delta, Done, RunEvent
from chatmem.web import sse


def delta(seq: int) -> RunEvent:
    return Delta(seq, str(seq), 0)


async def test_waiting_events_leave_together_and_silence_is_an_empty_batch(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(sse, "KEEPALIVE_SECONDS", 0.01)
    go_on = asyncio.Event()
    closed = asyncio.Event()

    async def source() -> AsyncIterator[RunEvent]:
        try:
            for seq in (1, 2, 3):
                yield delta(seq)
            await go_on.wait()  # silent until the consumer has seen a keep-alive
            yield Done(4, "completed", None, None, {}, 0.0, None, None)
        finally:
            closed.set()

    seen: list[list[int]] = []
    async with contextlib.aclosing(sse.batches(source())) as waiting:
        async for batch in waiting:
            seen.append([event.seq for event in batch])
            if not batch:
                go_on.set()
    assert seen[0] == [1, 2, 3]
    assert [] in seen
    assert seen[-1] == [4]
    assert closed.is_set()


async def test_the_pump_stops_when_the_consumer_does() -> None:
    cancelled = asyncio.Event()

    async def endless() -> AsyncIterator[RunEvent]:
        seq = 0
        try:
            while True:
                seq += 1
                yield delta(seq)
                await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise

    async with contextlib.aclosing(sse.batches(endless())) as waiting:
        async for batch in waiting:
            assert [event.seq for event in batch] == [1]
            break
    assert cancelled.is_set()
