"""The event journal of one run: numbers events, publishes them live, stores them in batches.

Publishing comes first (a watcher sees a delta as soon as the model sent it, from the
coordinator's live log); storing is batched — every ``flush_size`` events or
``flush_interval`` seconds — because a database write per streamed token would cost more than
the token.  A batch due in the middle of a stream is written by a background task, one batch
after another in sequence order, so the stream never waits for the database on its way to the
client.  A checkpoint (:meth:`EventJournal.flush`: a stored message, a tool call, the end of
the run) waits until every event emitted so far is stored, and raises there if a background
write failed (the failed batch is kept and written again by the next flush).

What a crash can lose is therefore at most one short batch of deltas; completed steps are
checkpointed as messages anyway (TURN-2).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any, TypeVar, cast

from sqlalchemy.orm import Session

from chatmem.store import runs
from chatmem.store.db import Database
from chatmem.turns.coordinator import Coordinator
from chatmem.turns.dbwork import work
from chatmem.turns.events import RunEvent

T = TypeVar("T")


class EventJournal:
    def __init__(
        self,
        run_id: str,
        db: Database,
        coordinator: Coordinator,
        *,
        start_seq: int = 0,
        flush_size: int = 64,
        flush_interval: float = 0.1,
    ) -> None:
        self.run_id = run_id
        self._db = db
        self._coordinator = coordinator
        self._seq = start_seq
        self._pending: list[RunEvent] = []
        self._flush_size = flush_size
        self._flush_interval = flush_interval
        self._last_flush = time.monotonic()
        self._writer: asyncio.Task[None] | None = None

    @property
    def seq(self) -> int:
        return self._seq

    async def emit(self, type_: str, data: dict[str, Any]) -> RunEvent:
        self._seq += 1
        event = RunEvent(self._seq, type_, data)
        await self._coordinator.publish(self.run_id, event)
        # One loop turn for the watchers just woken: the events stream sends an event in a
        # single step, before this turn parses the rest of a burst or writes its end.
        await asyncio.sleep(0)
        self._pending.append(event)
        if event.terminal:
            await self.flush()
        elif (
            len(self._pending) >= self._flush_size
            or time.monotonic() - self._last_flush >= self._flush_interval
        ):
            self._write_in_background()
        return event

    def _write_in_background(self) -> None:
        writer = self._writer
        if writer is not None and (
            not writer.done() or writer.cancelled() or writer.exception() is not None
        ):
            # One write at a time keeps the stored order; a failed one waits for the next
            # checkpoint to report it.
            return
        self._writer = asyncio.create_task(
            self._write_pending(), name=f"chatmem-journal-{self.run_id}"
        )

    async def _write_pending(self) -> None:
        batch, self._pending = self._pending, []
        if not batch:
            return
        self._last_flush = time.monotonic()
        try:
            await work(self._db, runs.store_events, self.run_id, batch)
        except Exception:
            # Not stored (the unit of work rolled back): keep the batch, in order, for the
            # next flush.
            self._pending[:0] = batch
            raise

    async def flush(self, also: Callable[[Session], T] | None = None) -> T | None:
        """Returns when every event emitted so far is stored.

        ``also(session)`` — the checkpoint's own writes (the answer, the run's end) — runs in
        the same transaction as the last batch: one commit instead of two or three, which
        matters when the next turn is queueing for the SQLite write lock."""
        writer, self._writer = self._writer, None
        if writer is not None:
            await writer  # a background write's failure surfaces here, at a checkpoint
        if also is None:
            await self._write_pending()
            return None
        batch, self._pending = self._pending, []
        if batch:
            self._last_flush = time.monotonic()

        def unit(session: Session) -> T:
            result = also(session)  # first: its refusal (a deleted conversation) is clearer
            runs.store_events(session, self.run_id, batch)
            return result

        try:
            return await work(self._db, unit)
        except Exception:
            self._pending[:0] = batch
            raise

    async def end(self, type_: str, data: dict[str, Any], also: Callable[[Session], T]) -> T:
        """Stores the run's terminal event with the rest and ``also``, then publishes it: a
        watcher that sees ``done`` finds the answer and the run's end stored."""
        self._seq += 1
        event = RunEvent(self._seq, type_, data)
        assert event.terminal
        self._pending.append(event)
        try:
            result = await self.flush(also)
        except BaseException:
            # Neither stored nor published: a later terminal event takes its number.
            if event in self._pending:
                self._pending.remove(event)
                self._seq -= 1
            raise
        await self._coordinator.publish(self.run_id, event)
        return cast(T, result)


def stored_events(session: Session, run_id: str, after: int) -> list[RunEvent]:
    """The run's stored events after ``after``, as run events (a watcher's replay)."""
    return [RunEvent(e.seq, e.type, e.data) for e in runs.events_after(session, run_id, after)]
