"""Short units of database work for the async turn code, run in a worker thread.

Each unit is one writer transaction (``Database.session(write=True)``: on SQLite it holds the
write lock from its first statement, so concurrent turns queue instead of failing on a stale
read snapshot).  A unit that still meets ``database is locked`` is retried a few times — the
failed attempt was rolled back whole, so a retry is safe.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from typing import Any, TypeVar

import anyio
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session

from chatmem.store.db import Database

T = TypeVar("T")
log = logging.getLogger(__name__)
ATTEMPTS = 12


def _locked(exc: OperationalError) -> bool:
    text = str(exc.orig).lower() if exc.orig is not None else str(exc).lower()
    return "database is locked" in text or "database table is locked" in text


def work_sync(
    db: Database, fn: Callable[..., T], *args: Any, _write: bool = True, **kwargs: Any
) -> T:
    for attempt in range(ATTEMPTS):
        try:
            # A writer session (SQLite: the write lock from the first statement), so
            # concurrent units queue on the busy timeout instead of failing mid-way.
            with db.session(write=_write) as session:
                return fn(session, *args, **kwargs)
        except OperationalError as exc:
            if not _locked(exc) or attempt == ATTEMPTS - 1:
                raise
            log.debug("database locked (attempt %d of %s); retrying", attempt + 1, fn)
            time.sleep(min(0.005 * 2**attempt, 0.2) * (0.5 + random.random()))
    raise AssertionError("unreachable")


async def work(db: Database, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Runs ``fn(session, *args, **kwargs)`` in one writer transaction in a worker thread."""
    return await anyio.to_thread.run_sync(lambda: work_sync(db, fn, *args, **kwargs))


async def read(db: Database, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Like :func:`work` for units that only read: they never wait for a writer."""
    return await anyio.to_thread.run_sync(lambda: work_sync(db, fn, *args, _write=False, **kwargs))


__all__ = ["Session", "work", "work_sync"]
