"""Short units of database work for the async turn code, run in a worker thread.

SQLite in WAL mode answers ``database is locked`` at once — without waiting out the busy
timeout — when a transaction that began by reading tries to write after another connection
committed (its snapshot is stale).  Many turns write concurrently (events, messages, the
ledger), so every unit of work here is retried a few times on that error; the failed attempt
was rolled back whole, so a retry is safe.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import Any, TypeVar

import anyio
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session

from chatmem.store.db import Database

T = TypeVar("T")
ATTEMPTS = 12


def _locked(exc: OperationalError) -> bool:
    text = str(exc.orig).lower() if exc.orig is not None else str(exc).lower()
    return "database is locked" in text or "database table is locked" in text


def work_sync(db: Database, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    for attempt in range(ATTEMPTS):
        try:
            with db.session() as session:
                return fn(session, *args, **kwargs)
        except OperationalError as exc:
            if not _locked(exc) or attempt == ATTEMPTS - 1:
                raise
            time.sleep(min(0.005 * 2**attempt, 0.2) * (0.5 + random.random()))
    raise AssertionError("unreachable")


async def work(db: Database, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Runs ``fn(session, *args, **kwargs)`` in one transaction in a worker thread."""
    return await anyio.to_thread.run_sync(lambda: work_sync(db, fn, *args, **kwargs))


__all__ = ["Session", "work", "work_sync"]
