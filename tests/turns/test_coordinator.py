"""The run coordinator contract, checked against both implementations (TURN-6, SCALE-2)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass

import pytest
from tests.conftest import skip_or_fail
from tests.support.clock import ManualClock

from chatmem.turns.coordinator import Coordinator, LocalCoordinator
from chatmem.turns.events import Delta, Done, Error, RunEvent

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


@dataclass
class Replicas:
    """Two coordinators that stand for two replicas (the same object for the local one), and
    ``elapse(seconds)``: time passing for them, without waiting for it."""

    a: Coordinator
    b: Coordinator
    elapse: Callable[[float], Awaitable[None]]


@pytest.fixture(params=["local", pytest.param("redis", marks=pytest.mark.redis)])
async def replicas(request: pytest.FixtureRequest) -> AsyncIterator[Replicas]:
    if request.param == "local":
        clock = ManualClock()
        local = LocalCoordinator(clock=clock)

        async def elapse_local(seconds: float) -> None:
            clock.advance(seconds)

        yield Replicas(local, local, elapse_local)
        return
    await _redis_or_skip()
    import redis.asyncio as aioredis

    from chatmem.turns.redis_coordinator import RedisCoordinator

    prefix = f"chatmem-test-{uuid.uuid4().hex[:8]}:"
    a = RedisCoordinator(REDIS_URL, prefix=prefix, stop_poll=0.05)
    b = RedisCoordinator(REDIS_URL, prefix=prefix, stop_poll=0.05)
    keys = aioredis.from_url(REDIS_URL)

    async def elapse_redis(seconds: float) -> None:
        # Redis keeps the time of its expiring keys (locks, liveness): every key of these
        # replicas has ``seconds`` less to live, and one with none left is gone, as if it
        # had expired.
        async for key in keys.scan_iter(match=f"{prefix}*"):
            left = await keys.pttl(key)
            if left < 0:  # no expiry (-1), or already gone (-2)
                continue
            left -= round(seconds * 1000)
            if left > 0:
                await keys.pexpire(key, left)
            else:
                await keys.delete(key)

    await a.start()
    await b.start()
    try:
        yield Replicas(a, b, elapse_redis)
    finally:
        await a.close()
        await b.close()
        async for key in keys.scan_iter(match=f"{prefix}*"):
            await keys.delete(key)
        await keys.aclose()


@pytest.fixture
def pair(replicas: Replicas) -> tuple[Coordinator, Coordinator]:
    return replicas.a, replicas.b


def _ev(seq: int, text: str = "x") -> RunEvent:
    return Delta(seq, text, 0)


def _done(seq: int) -> RunEvent:
    return Done(seq, "completed", None, None, {}, 0.0, None, None)


async def _collect(it: AsyncIterator[RunEvent]) -> list[RunEvent]:
    return [e async for e in it]


class Watcher:
    """Follows a run's events in a task and hands each one over as it arrives.

    Receiving an event is the proof that the watcher is following the run: the test
    publishes the next ones after that, never after a pause."""

    def __init__(self, coordinator: Coordinator, run_id: str, after: int) -> None:
        self._arrived: asyncio.Queue[RunEvent | None] = asyncio.Queue()
        self.task = asyncio.create_task(self._follow(coordinator.watch(run_id, after)))

    async def _follow(self, events: AsyncIterator[RunEvent]) -> list[RunEvent]:
        seen: list[RunEvent] = []
        try:
            async for event in events:
                seen.append(event)
                self._arrived.put_nowait(event)
        finally:
            self._arrived.put_nowait(None)  # the watch has ended
        return seen

    async def next_seq(self) -> int:
        """The sequence number of the next event (it fails if the watch ends first)."""
        event = await asyncio.wait_for(self._arrived.get(), 5)
        assert event is not None, "the watch ended early"
        return event.seq

    async def all(self) -> list[RunEvent]:
        """Every event the watch yielded, once it has ended."""
        return await asyncio.wait_for(self.task, 5)


async def test_watch_replays_after_cursor_then_follows_live(
    pair: tuple[Coordinator, Coordinator],
) -> None:
    owner, other = pair
    await owner.open_run("r1")
    for seq in (1, 2, 3):
        await owner.publish("r1", _ev(seq, text=str(seq)))
    watcher = Watcher(other, "r1", after=1)
    assert [await watcher.next_seq(), await watcher.next_seq()] == [2, 3]  # the replay
    # The watcher is past the replay and waiting: these two reach it live.
    await owner.publish("r1", _ev(4))
    await owner.publish("r1", _done(5))
    events = await watcher.all()
    assert [e.seq for e in events] == [2, 3, 4, 5]
    assert events[-1].type == "done"


async def test_several_watchers_see_the_same_events(pair: tuple[Coordinator, Coordinator]) -> None:
    owner, other = pair
    await owner.open_run("r2")
    await owner.publish("r2", _ev(1))
    watchers = [Watcher(c, "r2", after=0) for c in (owner, other, other)]
    for watcher in watchers:  # each one is following the run before the rest is published
        assert await watcher.next_seq() == 1
    for seq in range(2, 6):
        await owner.publish("r2", _ev(seq))
    await owner.publish("r2", Error(6, "provider_error", "x"))
    results = await asyncio.gather(*(w.all() for w in watchers))
    assert all([e.seq for e in r] == [1, 2, 3, 4, 5, 6] for r in results)


async def test_watch_ends_when_run_finishes_without_terminal_event(
    pair: tuple[Coordinator, Coordinator],
) -> None:
    owner, other = pair
    await owner.open_run("r3")
    await owner.publish("r3", _ev(1))
    watcher = Watcher(other, "r3", after=0)
    assert await watcher.next_seq() == 1  # following, and waiting for more
    await owner.finish_run("r3")
    assert [e.seq for e in await watcher.all()] == [1]


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


async def test_expired_lock_can_be_taken_over(replicas: Replicas) -> None:
    a, b = replicas.a, replicas.b
    assert await a.acquire("conversation:c2", ttl=30) is not None
    await replicas.elapse(25)
    assert await b.acquire("conversation:c2") is None  # not expired yet
    await replicas.elapse(10)
    token = await b.acquire("conversation:c2")
    assert token is not None
    await b.release("conversation:c2", token)


async def test_replica_liveness(pair: tuple[Coordinator, Coordinator]) -> None:
    a, b = pair
    assert await a.replica_alive(a.replica_id)
    assert await a.replica_alive(b.replica_id)
    assert not await a.replica_alive("dead-replica")
    assert not await a.replica_alive(None)
