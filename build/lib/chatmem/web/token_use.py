"""When each API token was last used.

Requests authenticate on the hot path, where a write would take SQLite's write lock on
every API call.  So a use is only noted in memory (:meth:`TokenUse.seen`, when a token is
looked up: at most every few seconds per token, the credential cache answers in between)
and written about once a minute, all tokens in one short write (:meth:`TokenUse.flush`),
and once more when the server stops.  ``last_used_at`` is therefore right to a minute or so.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from datetime import datetime

import anyio.to_thread

from chatmem.store import accounts
from chatmem.store.db import Database
from chatmem.store.types import utcnow

log = logging.getLogger(__name__)

#: Seconds between two writes of the uses noted meanwhile.
FLUSH_SECONDS = 60.0


class TokenUse:
    """The uses of API tokens noted since the last write (token id → when)."""

    def __init__(self, clock: Callable[[], datetime] = utcnow) -> None:
        self._clock = clock
        self._seen: dict[str, datetime] = {}
        self._lock = threading.Lock()  # authentication runs in worker threads too

    def seen(self, token_id: str) -> None:
        now = self._clock()
        with self._lock:
            self._seen[token_id] = now

    async def flush(self, db: Database) -> None:
        """Writes the uses noted so far; if the write fails they are kept for the next one."""
        with self._lock:
            used, self._seen = self._seen, {}
        if not used:
            return

        def write() -> None:
            with db.session(write=True) as session:
                accounts.mark_tokens_used(session, used)

        try:
            await anyio.to_thread.run_sync(write)
        except BaseException:
            with self._lock:  # newer uses noted meanwhile win
                self._seen = {**used, **self._seen}
            raise

    async def run(self, db: Database, every: float = FLUSH_SECONDS) -> None:
        """Flushes every ``every`` seconds until cancelled (the app's lifespan task)."""
        while True:
            await asyncio.sleep(every)
            try:
                await self.flush(db)
            except Exception:  # a locked or unreachable database: the next round retries
                log.warning("could not record API token use; retrying later", exc_info=True)
