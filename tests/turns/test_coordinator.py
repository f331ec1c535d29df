"""The run coordinator contract, checked against both implementations (TURN-6, SCALE-2)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import pytest
from tests.conftest import skip_or_fail

from chatmem.turns.coordinator import Coordinator, LocalCoordinator
from chatmem.turns.events import RunEvent

REDIS_URL = "redis://127.0.0.1:6379/0"


async def _redis_or_skip() -> None:
    import redis.asyncio as aioredis

    client = aioredis.from_url(REDIS_URL)
    try:
        await client.ping()
    except Exception as exc:
        skip_or_fail(f"Redis not reachable at {REDIS_URL}: {exc}")
    finally:
        await client.aclose()


@pytest.fixture(params=["local", pytest.param("redis", marks=pytest.mark.redis)])
async def pair(request: pytest.FixtureRequest) -> AsyncIterator[tuple[Coordinator, Coordinator]]:
    """Two coordinators that stand for two replicas (the same object for the local one)."""
    if request.param == "local":
        local = LocalCoordinator()
        yield local, local
        return
    await _redis_or_skip()
    from chatmem.turns.redis_coordinator import RedisCoordinator

    prefix = f"chatmem-test-{uuid.uuid4().hex[:8]}:"
    a = RedisCoordinator(REDIS_URL, prefix=prefix, stop_poll=0.05)
    b = RedisCoordinator(REDIS_URL, prefix=prefix, stop_poll=0.05)
    await a.start()
    await b.start()
    try:
        yield a, b
    finally:
        await a.close()
        await b.close()


def _ev(seq: int, type_: str = "delta", text: str = "x") -> RunEvent:
    return RunEvent(seq, type_, {"text": text})


async def _collect(it: AsyncIterator[RunEvent]) -> list[RunEvent]:
    return [e async for e in it]


async def test_watch_replays_after_cursor_then_follows_live(
    pair: tuple[Coordinator, Coordinator],
) -> None:
    owner, other = pair
    await owner.open_run("r1")
    for seq in (1, 2, 3):
        await owner.publish("r1", _ev(seq, text=str(seq)))
    watcher = asyncio.create_task(_collect(other.watch("r1", after=1)))
    await asyncio.sleep(0.05)
    await owner.publish("r1", _ev(4))
    await owner.publish("r1", _ev(5, "done"))
    events = await asyncio.wait_for(watcher, 5)
    assert [e.seq for e in events] == [2, 3, 4, 5]
    assert events[-1].type == "done"


async def test_several_watchers_see_the_same_events(pair: tuple[Coordinator, Coordinator]) -> None:
    owner, other = pair
    await owner.open_run("r2")
    watchers = [
        asyncio.create_task(_collect(c.watch("r2", after=0))) for c in (owner, other, other)
    ]
    await asyncio.sleep(0.05)
    for seq in range(1, 6):
        await owner.publish("r2", _ev(seq))
    await owner.publish("r2", _ev(6, "error"))
    results = await asyncio.wait_for(asyncio.gather(*watchers), 5)
    assert all([e.seq for e in r] == [1, 2, 3, 4, 5, 6] for r in results)


async def test_watch_ends_when_run_finishes_without_terminal_event(
    pair: tuple[Coordinator, Coordinator],
) -> None:
    owner, other = pair
    await owner.open_run("r3")
    await owner.publish("r3", _ev(1))
    watcher = asyncio.create_task(_collect(other.watch("r3", after=0)))
    await asyncio.sleep(0.05)
    await owner.finish_run("r3")
    assert [e.seq for e in await asyncio.wait_for(watcher, 5)] == [1]


async def test_unknown_run_is_not_live_and_watch_yields_nothing(
    pair: tuple[Coordinator, Coordinator],
) -> None:
    _, other = pair
    assert not await other.is_live("nope")
    assert await _collect(other.watch("nope", after=0)) == []


async def test_stop_requested_elsewhere_sets_owner_signal(
    pair: tuple[Coordinator, Coordinator],
) -> None:
    owner, other = pair
    signal = owner.stop_signal("r4")
    assert not signal.is_set()
    await other.request_stop("r4")
    await asyncio.wait_for(signal.wait(), 5)
    owner.forget_stop("r4")


async def test_lock_is_exclusive_until_released(pair: tuple[Coordinator, Coordinator]) -> None:
    a, b = pair
    token = await a.acquire("conversation:c1")
    assert token is not None
    assert await b.acquire("conversation:c1") is None
    assert await a.refresh("conversation:c1", token)
    await b.release("conversation:c1", "not-the-owner")
    assert await b.acquire("conversation:c1") is None
    await a.release("conversation:c1", token)
    again = await b.acquire("conversation:c1")
    assert again is not None
    await b.release("conversation:c1", again)


async def test_expired_lock_can_be_taken_over(pair: tuple[Coordinator, Coordinator]) -> None:
    a, b = pair
    assert await a.acquire("conversation:c2", ttl=0.1) is not None
    await asyncio.sleep(0.3)
    token = await b.acquire("conversation:c2")
    assert token is not None
    await b.release("conversation:c2", token)


async def test_replica_liveness(pair: tuple[Coordinator, Coordinator]) -> None:
    a, b = pair
    assert await a.replica_alive(a.replica_id)
    assert await a.replica_alive(b.replica_id)
    assert not await a.replica_alive("dead-replica")
    assert not await a.replica_alive(None)
