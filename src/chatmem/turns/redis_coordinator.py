"""Cross-replica run coordination through Redis (SCALE-2).

Keys (all under ``chatmem:``):

- ``run:{id}:events`` — a stream holding the run's live event log (one field ``e``, the
  event JSON).  Any replica replays it with ``XRANGE`` and follows it with ``XREAD BLOCK``.
- ``run:{id}:live`` — ``running`` or ``finished``; expires ``linger`` seconds after the end,
  together with the stream, so Redis only holds runs that are live or just ended.
- ``run:{id}:stop`` — set by ``request_stop`` on any replica; the owning replica polls the
  keys of its running runs every ``stop_poll`` seconds and sets the local stop signal.
- ``lock:{name}`` — ``SET NX PX`` with a random owner token; refresh and release are
  compare-and-set Lua scripts so a replica never frees a lock it lost.
- ``replica:{id}`` — refreshed every ``heartbeat`` seconds with a ``3 × heartbeat`` expiry:
  a replica whose key is gone is dead, and the others mark its runs ``interrupted``.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator
from typing import Any

import redis.asyncio as aioredis

from chatmem.turns.coordinator import LINGER_SECONDS, Coordinator, new_replica_id
from chatmem.turns.events import RunEvent, from_json, to_json

_REFRESH = """
if redis.call('get', KEYS[1]) == ARGV[1] then
  return redis.call('pexpire', KEYS[1], ARGV[2])
end
return 0
"""
_RELEASE = """
if redis.call('get', KEYS[1]) == ARGV[1] then
  return redis.call('del', KEYS[1])
end
return 0
"""


class RedisCoordinator(Coordinator):
    def __init__(
        self,
        url: str,
        *,
        replica_id: str | None = None,
        prefix: str = "chatmem:",
        linger: float = LINGER_SECONDS,
        heartbeat: float = 5.0,
        stop_poll: float = 0.2,
    ) -> None:
        self.replica_id = replica_id or new_replica_id()
        self._redis: Any = aioredis.from_url(url, decode_responses=True)
        self._p = prefix
        self._linger = linger
        self._heartbeat = heartbeat
        self._stop_poll = stop_poll
        self._stops: dict[str, asyncio.Event] = {}
        self._tasks: list[asyncio.Task[None]] = []

    def _k(self, *parts: str) -> str:
        return self._p + ":".join(parts)

    async def start(self) -> None:
        await self._beat()
        self._tasks = [
            asyncio.create_task(self._heartbeat_loop(), name="chatmem-redis-heartbeat"),
            asyncio.create_task(self._stop_loop(), name="chatmem-redis-stops"),
        ]

    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._tasks = []
        with contextlib.suppress(Exception):
            await self._redis.delete(self._k("replica", self.replica_id))
        await self._redis.aclose()

    async def readiness(self) -> str | None:
        try:
            await self._redis.ping()
        except Exception as exc:
            return f"Redis cannot be reached ({type(exc).__name__})"
        return None

    async def _beat(self) -> None:
        await self._redis.set(
            self._k("replica", self.replica_id), "1", px=int(self._heartbeat * 3000)
        )

    async def _heartbeat_loop(self) -> None:
        while True:
            await asyncio.sleep(self._heartbeat)
            with contextlib.suppress(Exception):  # a Redis blip must not kill the replica
                await self._beat()

    async def _stop_loop(self) -> None:
        while True:
            await asyncio.sleep(self._stop_poll)
            pending = [r for r, ev in self._stops.items() if not ev.is_set()]
            if not pending:
                continue
            try:
                flags = await self._redis.mget([self._k("run", r, "stop") for r in pending])
            except Exception:
                continue
            for run_id, flag in zip(pending, flags, strict=True):
                if flag:
                    self._stops[run_id].set()

    # live events -------------------------------------------------------------------------
    async def open_run(self, run_id: str) -> None:
        await self._redis.set(self._k("run", run_id, "live"), "running")

    async def publish(self, run_id: str, event: RunEvent) -> None:
        await self._redis.xadd(self._k("run", run_id, "events"), {"e": to_json(event)})

    async def finish_run(self, run_id: str) -> None:
        ttl = max(1, int(self._linger))
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.set(self._k("run", run_id, "live"), "finished", ex=ttl)
            pipe.expire(self._k("run", run_id, "events"), ttl)
            pipe.expire(self._k("run", run_id, "stop"), ttl)
            await pipe.execute()

    async def is_live(self, run_id: str) -> bool:
        return bool(await self._redis.exists(self._k("run", run_id, "live")))

    async def watch(self, run_id: str, after: int) -> AsyncIterator[RunEvent]:
        stream = self._k("run", run_id, "events")
        live_key = self._k("run", run_id, "live")
        if not await self._redis.exists(live_key):
            return
        last_id = "0-0"
        while True:
            reply = await self._redis.xread({stream: last_id}, block=1000, count=500)
            entries = reply[0][1] if reply else []
            for entry_id, fields in entries:
                last_id = entry_id
                event = from_json(fields["e"])
                if event.seq > after:
                    yield event
                    if event.terminal:
                        return
            if not entries:
                state = await self._redis.get(live_key)
                if state != "running":
                    # Finished (or expired): drain what is left, then stop.
                    tail = await self._redis.xrange(stream, min=f"({last_id}", max="+")
                    for _entry_id, fields in tail:
                        event = from_json(fields["e"])
                        if event.seq > after:
                            yield event
                    return

    # stop --------------------------------------------------------------------------------
    async def request_stop(self, run_id: str) -> None:
        await self._redis.set(self._k("run", run_id, "stop"), "1", ex=24 * 3600)
        local = self._stops.get(run_id)
        if local is not None:
            local.set()

    def stop_signal(self, run_id: str) -> asyncio.Event:
        return self._stops.setdefault(run_id, asyncio.Event())

    def forget_stop(self, run_id: str) -> None:
        self._stops.pop(run_id, None)

    # locks -------------------------------------------------------------------------------
    async def acquire(self, name: str, ttl: float = 30.0) -> str | None:
        token = uuid.uuid4().hex
        ok = await self._redis.set(self._k("lock", name), token, nx=True, px=int(ttl * 1000))
        return token if ok else None

    async def refresh(self, name: str, token: str, ttl: float = 30.0) -> bool:
        done = await self._redis.eval(_REFRESH, 1, self._k("lock", name), token, int(ttl * 1000))
        return bool(done)

    async def release(self, name: str, token: str) -> None:
        await self._redis.eval(_RELEASE, 1, self._k("lock", name), token)

    async def force_release(self, name: str) -> None:
        await self._redis.delete(self._k("lock", name))

    # liveness ----------------------------------------------------------------------------
    async def replica_alive(self, replica_id: str | None) -> bool:
        if not replica_id:
            return False
        if replica_id == self.replica_id:
            return True
        return bool(await self._redis.exists(self._k("replica", replica_id)))
