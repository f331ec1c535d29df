"""Short units of database work for the async turn code.

Each unit is one writer transaction (``Database.session(write=True)``: on SQLite it holds the
write lock from its first statement, so concurrent turns queue instead of failing on a stale
read snapshot), run in a worker thread.  A unit that still meets ``database is locked`` is
retried a few times — the failed attempt was rolled back whole, so a retry is safe.

:func:`quick_work` is the exception, for the unit on the way to the first token: on SQLite it
runs on the event loop when the write lock is free at once (a thread hop costs more than the
unit), and goes to a worker thread only when it would have to wait.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from typing import Concatenate, ParamSpec, TypeVar

import anyio
from sqlalchemy import Connection
from sqlalchemy.exc import IntegrityError, OperationalError
from sqlalchemy.orm import Session

from chatmem.store.db import Database

T = TypeVar("T")
P = ParamSpec("P")
log = logging.getLogger(__name__)
ATTEMPTS = 12


def _locked(exc: OperationalError) -> bool:
    text = str(exc.orig).lower() if exc.orig is not None else str(exc).lower()
    return "database is locked" in text or "database table is locked" in text


def _unit_sync(
    db: Database,
    write: bool,
    fn: Callable[Concatenate[Session, P], T],
    /,
    *args: P.args,
    **kwargs: P.kwargs,
) -> T:
    """``fn(session, *args, **kwargs)`` in one transaction (``write``: a writer session),
    retried while SQLite says ``database is locked``."""
    for attempt in range(ATTEMPTS):
        try:
            # A writer session (SQLite: the write lock from the first statement), so
            # concurrent units queue on the busy timeout instead of failing mid-way.
            with db.session(write=write) as session:
                return fn(session, *args, **kwargs)
        except OperationalError as exc:
            if not _locked(exc) or attempt == ATTEMPTS - 1:
                raise
            log.debug("database locked (attempt %d of %s); retrying", attempt + 1, fn)
            time.sleep(min(0.005 * 2**attempt, 0.2) * (0.5 + random.random()))
    raise AssertionError("unreachable")


def work_sync(
    db: Database, fn: Callable[Concatenate[Session, P], T], /, *args: P.args, **kwargs: P.kwargs
) -> T:
    """Runs ``fn(session, *args, **kwargs)`` in one writer transaction, in this thread."""
    return _unit_sync(db, True, fn, *args, **kwargs)


async def work(
    db: Database, fn: Callable[Concatenate[Session, P], T], /, *args: P.args, **kwargs: P.kwargs
) -> T:
    """Runs ``fn(session, *args, **kwargs)`` in one writer transaction in a worker thread,
    once it is this unit's turn to write (SQLite: :class:`~chatmem.store.db.TaskGate`; the
    wait holds no thread)."""
    return await _work(db, False, fn, *args, **kwargs)


async def work_in_thread(
    db: Database, fn: Callable[Concatenate[Session, P], T], /, *args: P.args, **kwargs: P.kwargs
) -> T:
    """:func:`work` always in a worker thread, on PostgreSQL too: for a unit of much Python
    work (a batch of an import), which must not hold the event loop."""
    async with db.slots.hold(), db.writers.hold():
        return await anyio.to_thread.run_sync(lambda: _unit_sync(db, True, fn, *args, **kwargs))


async def _work(
    db: Database,
    first: bool,
    fn: Callable[Concatenate[Session, P], T],
    /,
    *args: P.args,
    **kwargs: P.kwargs,
) -> T:
    async with db.slots.hold(first=first), db.writers.hold(first=first):
        if db.async_sessionmaker is not None:
            return await _unit_async(db, first, fn, *args, **kwargs)
        return await anyio.to_thread.run_sync(lambda: _unit_sync(db, True, fn, *args, **kwargs))


async def _unit_async(
    db: Database,
    first: bool,
    fn: Callable[Concatenate[Session, P], T],
    /,
    *args: P.args,
    **kwargs: P.kwargs,
) -> T:
    """PostgreSQL: ``fn(session, …)`` in one transaction on the event loop — its sync code
    runs in a greenlet and each statement awaits the asyncio driver, so no worker thread (and
    no GIL hand-over) is involved — once one of the pool's connections is its turn
    (``Database.async_units``; ``first``: ahead of the others)."""
    assert db.async_sessionmaker is not None
    async with (
        db.async_units.hold(first=first),
        db.async_sessionmaker() as session,
        session.begin(),
    ):
        return await session.run_sync(lambda sync: fn(sync, *args, **kwargs))


async def read(
    db: Database, fn: Callable[Concatenate[Session, P], T], /, *args: P.args, **kwargs: P.kwargs
) -> T:
    """Like :func:`work` for units that only read: they never wait for a writer."""
    async with db.slots.hold():
        if db.async_sessionmaker is not None:
            return await _unit_async(db, False, fn, *args, **kwargs)
        return await anyio.to_thread.run_sync(lambda: _unit_sync(db, False, fn, *args, **kwargs))


async def quick_work(
    db: Database,
    fn: Callable[Concatenate[Session, P], T],
    /,
    *args: P.args,
    **kwargs: P.kwargs,
) -> T:
    """A short write unit (``fn`` must only touch the database: it may run twice).

    On SQLite it runs on the event loop once it is its turn (a worker-thread hop costs more
    than the unit: two GIL hand-overs, each up to the 5 ms switch interval while the loop is
    busy), with a connection that does not wait for the write lock; if another process holds
    that lock (``database is locked`` at ``BEGIN IMMEDIATE``, so nothing was done) the unit
    goes to a worker thread and waits there.  Elsewhere it is :func:`work`."""
    return await _quick(db, False, fn, *args, **kwargs)


async def first_work(
    db: Database,
    fn: Callable[Concatenate[Session, P], T],
    /,
    *args: P.args,
    **kwargs: P.kwargs,
) -> T:
    """:func:`quick_work` for a unit on the way to a turn's first token (its admission, its
    first events): it goes ahead of the other units waiting to write
    (:class:`~chatmem.store.db.Turns`)."""
    return await _quick(db, True, fn, *args, **kwargs)


class KeyTaken(Exception):
    """A unit broke a unique rule: a concurrent unit stored the same key first (the caller
    answers with what that unit stored)."""


async def first_unique_work(
    db: Database,
    fn: Callable[Concatenate[Session, P], T],
    /,
    *args: P.args,
    **kwargs: P.kwargs,
) -> T:
    """:func:`first_work`; a unique rule the unit broke is :class:`KeyTaken` (rolled back)."""
    try:
        return await first_work(db, fn, *args, **kwargs)
    except IntegrityError as exc:
        raise KeyTaken() from exc


async def first_statement(
    db: Database,
    fn: Callable[Concatenate[Connection, P], T],
    /,
    *args: P.args,
    **kwargs: P.kwargs,
) -> T:
    """:func:`first_work` for a unit of Core statements that is a single statement on
    PostgreSQL: ``fn`` gets the unit's ``Connection`` (no ORM session is set up and torn
    down around it: a tenth of a millisecond on SQLite, on the way to the first token).  On
    PostgreSQL it runs in autocommit — the statement is its own transaction, without the
    BEGIN and COMMIT round trips.  On SQLite ``fn`` may run several statements (in-process),
    in one writer transaction as for :func:`first_work`."""
    return await _statement(db, True, lambda connection: fn(connection, *args, **kwargs))


async def quick_statement(
    db: Database,
    fn: Callable[Concatenate[Connection, P], T],
    /,
    *args: P.args,
    **kwargs: P.kwargs,
) -> T:
    """:func:`quick_work` for a unit that is one statement on PostgreSQL (see
    :func:`first_statement`)."""
    return await _statement(db, False, lambda connection: fn(connection, *args, **kwargs))


async def _statement(db: Database, first: bool, fn: Callable[[Connection], T]) -> T:
    if db.async_autocommit is None:
        return await _quick_core(db, first, fn)
    async with (
        db.slots.hold(first=first),
        db.async_units.hold(first=first),
        db.async_autocommit.connect() as connection,
    ):
        return await connection.run_sync(fn)


async def _quick(
    db: Database,
    first: bool,
    fn: Callable[Concatenate[Session, P], T],
    /,
    *args: P.args,
    **kwargs: P.kwargs,
) -> T:
    def in_session(connection: Connection) -> T:
        # A session on the unit's connection joins its transaction: the unit sees a Session
        # as everywhere else, and the connection's block commits it.
        session = Session(bind=connection, expire_on_commit=False)
        try:
            result = fn(session, *args, **kwargs)
            session.flush()
        finally:
            session.close()
        return result

    return await _quick_core(db, first, in_session)


async def _quick_core(db: Database, first: bool, fn: Callable[[Connection], T]) -> T:
    def in_unit(session: Session) -> T:
        return fn(session.connection())

    if not db.can_write_nowait:
        return await _work(db, first, in_unit)
    async with db.slots.hold(first=first), db.writers.hold(first=first):
        try:
            with db.connection_nowait() as connection:
                return fn(connection)
        except OperationalError as exc:
            if not _locked(exc):
                raise
        return await anyio.to_thread.run_sync(lambda: _unit_sync(db, True, in_unit))


__all__ = [
    "Session",
    "first_statement",
    "first_work",
    "quick_statement",
    "quick_work",
    "read",
    "work",
    "work_in_thread",
    "work_sync",
]
