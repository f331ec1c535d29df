"""Run coordination: live event fan-out, stop signals, per-conversation locks, liveness.

The database is the durable record of a run (status, stored events, messages); the
coordinator is the *live* side that lets any watcher follow a running turn with low latency.
It is an interface with two implementations:

- :class:`LocalCoordinator` — one process (SCALE-1): everything in memory, on the event loop.
- ``RedisCoordinator`` (``chatmem.turns.redis_coordinator``) — several replicas (SCALE-2):
  events in a Redis stream per run, stop signals as keys plus a pub/sub nudge, locks as
  ``SET NX PX`` with an owner token, replica liveness as expiring keys.

Live event log.  While a run is live the coordinator keeps every event it published, so
:meth:`Coordinator.watch` can replay from any sequence number and then follow — a watcher
never has to stitch the database and the live feed together while the run is moving.  The
runner flushes events to the database in small batches; after the final flush it calls
:meth:`Coordinator.finish_run`, and the live log is kept a little longer (``linger``) for
watchers that attached just before the end.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

from chatmem.errors import missing_driver
from chatmem.settings import Settings
from chatmem.turns.events import RunEvent

#: How long a finished run's live log stays available to late watchers (seconds).
LINGER_SECONDS = 60.0


def new_replica_id() -> str:
    return uuid.uuid4().hex[:16]


class Coordinator(ABC):
    """What the runner and the routes need from "the other replicas"."""

    replica_id: str

    async def start(self) -> None:  # noqa: B027 - optional hook
        """Start background work (heartbeats, listeners)."""

    async def close(self) -> None:  # noqa: B027 - optional hook
        """Stop background work and release connections."""

    async def readiness(self) -> str | None:
        """Why the replicas' shared state cannot be reached, or None (``/readyz``)."""
        return None

    # live events -------------------------------------------------------------------------
    @abstractmethod
    async def open_run(self, run_id: str) -> None:
        """Announce that ``run_id`` is live on this replica (before its first event)."""

    @abstractmethod
    async def publish(self, run_id: str, event: RunEvent) -> None:
        """Append ``event`` to the run's live log and wake its watchers."""

    @abstractmethod
    async def finish_run(self, run_id: str) -> None:
        """The run has ended and all its events are in the database."""

    @abstractmethod
    async def is_live(self, run_id: str) -> bool:
        """Whether the coordinator holds a live log for ``run_id`` (running or lingering)."""

    @abstractmethod
    def watch(self, run_id: str, after: int) -> AsyncIterator[RunEvent]:
        """Events with ``seq > after``: replayed, then live, ending after a terminal event or
        when the run is finished.  Yields nothing if the run is not live."""

    # stop --------------------------------------------------------------------------------
    @abstractmethod
    async def request_stop(self, run_id: str) -> None:
        """Ask the replica running ``run_id`` to stop it."""

    @abstractmethod
    def stop_signal(self, run_id: str) -> asyncio.Event:
        """An event set when a stop is requested for ``run_id`` (from any replica)."""

    @abstractmethod
    def forget_stop(self, run_id: str) -> None:
        """Drop the local stop signal of a finished run."""

    # locks -------------------------------------------------------------------------------
    @abstractmethod
    async def acquire(self, name: str, ttl: float = 30.0) -> str | None:
        """Take the lock ``name``; returns an owner token, or None when someone holds it."""

    @abstractmethod
    async def refresh(self, name: str, token: str, ttl: float = 30.0) -> bool:
        """Extend a held lock; False if it was lost."""

    @abstractmethod
    async def release(self, name: str, token: str) -> None:
        """Release the lock if ``token`` still owns it."""

    @abstractmethod
    async def force_release(self, name: str) -> None:
        """Drop a lock whatever its owner (used after its owner was found dead)."""

    # liveness ----------------------------------------------------------------------------
    @abstractmethod
    async def replica_alive(self, replica_id: str | None) -> bool:
        """Whether the replica that owns a run is still alive."""


@dataclass
class _LiveLog:
    events: list[RunEvent] = field(default_factory=list)
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    finished_at: float | None = None

    def wake(self) -> None:
        self.changed.set()
        self.changed = asyncio.Event()


class LocalCoordinator(Coordinator):
    """Single-process coordination.  All methods must run on the app's event loop.
    ``clock`` is monotonic seconds (injectable for tests: lock expiry, linger)."""

    def __init__(
        self,
        replica_id: str | None = None,
        linger: float = LINGER_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.replica_id = replica_id or new_replica_id()
        self._linger = linger
        self._clock = clock
        self._logs: dict[str, _LiveLog] = {}
        self._stops: dict[str, asyncio.Event] = {}
        self._locks: dict[str, tuple[str, float]] = {}
        self._next_prune = 0.0

    def _prune(self) -> None:
        now = self._clock()
        if now < self._next_prune:
            return  # a walk over every live log at most once a second, not on every call
        self._next_prune = now + 1.0
        for run_id in [
            r
            for r, log in self._logs.items()
            if log.finished_at is not None and now - log.finished_at > self._linger
        ]:
            del self._logs[run_id]

    async def open_run(self, run_id: str) -> None:
        self._prune()
        self._logs.setdefault(run_id, _LiveLog())

    async def publish(self, run_id: str, event: RunEvent) -> None:
        log = self._logs.setdefault(run_id, _LiveLog())
        log.events.append(event)
        log.wake()

    async def finish_run(self, run_id: str) -> None:
        log = self._logs.get(run_id)
        if log is not None:
            log.finished_at = self._clock()
            log.wake()

    async def is_live(self, run_id: str) -> bool:
        self._prune()
        return run_id in self._logs

    async def watch(self, run_id: str, after: int) -> AsyncIterator[RunEvent]:
        log = self._logs.get(run_id)
        if log is None:
            return
        index = 0
        while True:
            while index < len(log.events):
                event = log.events[index]
                index += 1
                if event.seq > after:
                    yield event
                    if event.terminal:
                        return
            if log.finished_at is not None:
                return
            await log.changed.wait()

    async def request_stop(self, run_id: str) -> None:
        self.stop_signal(run_id).set()

    def stop_signal(self, run_id: str) -> asyncio.Event:
        return self._stops.setdefault(run_id, asyncio.Event())

    def forget_stop(self, run_id: str) -> None:
        self._stops.pop(run_id, None)

    async def acquire(self, name: str, ttl: float = 30.0) -> str | None:
        now = self._clock()
        held = self._locks.get(name)
        if held is not None and held[1] > now:
            return None
        token = uuid.uuid4().hex
        self._locks[name] = (token, now + ttl)
        return token

    async def refresh(self, name: str, token: str, ttl: float = 30.0) -> bool:
        held = self._locks.get(name)
        if held is None or held[0] != token:
            return False
        self._locks[name] = (token, self._clock() + ttl)
        return True

    async def release(self, name: str, token: str) -> None:
        held = self._locks.get(name)
        if held is not None and held[0] == token:
            del self._locks[name]

    async def force_release(self, name: str) -> None:
        self._locks.pop(name, None)

    async def replica_alive(self, replica_id: str | None) -> bool:
        # One process: a run owned by another replica id belongs to a previous, dead process.
        return replica_id == self.replica_id


def coordinator_for(settings: Settings) -> Coordinator:
    """The deployment's coordinator: Redis's when ``redis_url`` is set (SCALE-2), else this
    process's own (SCALE-1)."""
    if settings.redis_url:
        try:
            from chatmem.turns.redis_coordinator import RedisCoordinator  # imports this module
        except ImportError:
            raise missing_driver("CHATMEM_REDIS_URL", "Redis") from None

        return RedisCoordinator(settings.redis_url, heartbeat=settings.replica_heartbeat)
    return LocalCoordinator()
