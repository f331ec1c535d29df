"""SQLite: one pool of connections for every unit, handed out last in, first out.

SQLite drops a connection's page cache whenever another connection wrote since its last
transaction, so the unit that comes next gets the connection used last (most often the last
writer, whose cache still holds).  The event loop's writers (``connection_nowait``) come from
the same pool and must not wait for the write lock; every other unit waits for it (the busy
timeout), whichever unit the connection served before."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Connection, text
from sqlalchemy.exc import OperationalError

from chatmem.store.db import SQLITE_BUSY_TIMEOUT_MS, Database


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Database]:
    database = Database(f"sqlite:///{tmp_path / 'pool.db'}")
    database.migrate()
    yield database
    database.dispose()


def _busy_timeout(connection: Connection) -> int:
    return int(connection.exec_driver_sql("PRAGMA busy_timeout").scalar_one())


def _driver(connection: Connection) -> object:
    return connection.connection.driver_connection


def test_the_connection_returned_last_is_handed_out_next(db: Database) -> None:
    with db.engine.connect() as first, db.engine.connect() as second:
        first_driver, second_driver = _driver(first), _driver(second)
        assert first_driver is not second_driver
    # ``second`` went back first, ``first`` last.
    with db.engine.connect() as again:
        assert _driver(again) is first_driver
    with db.session(write=True) as session:
        assert _driver(session.connection()) is first_driver


def test_loop_writers_do_not_wait_and_the_same_connection_waits_again_after(
    db: Database,
) -> None:
    with db.connection_nowait() as connection:
        assert _busy_timeout(connection) == 0
        loop_writer = _driver(connection)
    with db.session(write=True) as session:
        connection = session.connection()
        assert _driver(connection) is loop_writer  # the same pooled connection…
        assert _busy_timeout(connection) == SQLITE_BUSY_TIMEOUT_MS  # …waits again
    with db.engine.connect() as reader:
        assert _driver(reader) is loop_writer
        assert _busy_timeout(reader) == SQLITE_BUSY_TIMEOUT_MS


def test_a_loop_writer_fails_at_once_while_another_process_writes(
    db: Database, tmp_path: Path
) -> None:
    holder = sqlite3.connect(tmp_path / "pool.db", isolation_level=None)
    try:
        holder.execute("BEGIN IMMEDIATE")
        with pytest.raises(OperationalError, match="database is locked"), db.connection_nowait():
            pass
        holder.execute("COMMIT")
    finally:
        holder.close()
    with db.connection_nowait() as connection:  # the lock is free: it writes
        connection.execute(text("CREATE TABLE after_lock (n INTEGER)"))
