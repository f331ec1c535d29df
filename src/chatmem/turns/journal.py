"""The event journal of one run: numbers events, publishes them live, stores them in batches.

Publishing comes first (a watcher sees a delta as soon as the model sent it); storing is
batched — every ``flush_size`` events or ``flush_interval`` seconds, and always at a
checkpoint — because a database write per streamed token would cost more than the token.
What a crash can lose is therefore at most one short batch of deltas; completed steps are
checkpointed as messages anyway (TURN-2).
"""

from __future__ import annotations

import time
from typing import Any

from chatmem.store.db import Database
from chatmem.turns import runs
from chatmem.turns.coordinator import Coordinator
from chatmem.turns.dbwork import work
from chatmem.turns.events import RunEvent


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

    @property
    def seq(self) -> int:
        return self._seq

    async def emit(self, type_: str, data: dict[str, Any]) -> RunEvent:
        self._seq += 1
        event = RunEvent(self._seq, type_, data)
        await self._coordinator.publish(self.run_id, event)
        self._pending.append(event)
        if event.terminal or (
            len(self._pending) >= self._flush_size
            or time.monotonic() - self._last_flush >= self._flush_interval
        ):
            await self.flush()
        return event

    async def flush(self) -> None:
        if not self._pending:
            return
        batch, self._pending = self._pending, []
        self._last_flush = time.monotonic()

        await work(self._db, runs.store_events, self.run_id, batch)
