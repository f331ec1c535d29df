"""``quick_work``: on the event loop when SQLite's write lock is free, in a worker thread
(waiting its turn) when another writer holds it — the unit is done either way, once."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import text

from chatmem.store.db import Database
from chatmem.store.units import quick_work


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Database]:
    database = Database(f"sqlite:///{tmp_path / 'work.db'}")
    database.migrate()
    with database.engine.begin() as connection:
        connection.execute(text("CREATE TABLE hits (n INTEGER)"))
    yield database
    database.dispose()


def _count(db: Database) -> int:
    with db.engine.connect() as connection:
        return int(connection.execute(text("SELECT count(*) FROM hits")).scalar_one())


def _unit(connection: object, threads: list[str]) -> str:
    threads.append(threading.current_thread().name)
    connection.execute(text("INSERT INTO hits VALUES (1)"))  # type: ignore[attr-defined]
    return "done"


async def test_runs_on_the_loop_when_the_write_lock_is_free(db: Database) -> None:
    threads: list[str] = []
    assert await quick_work(db, _unit, threads) == "done"
    assert threads == [threading.current_thread().name]
    assert _count(db) == 1


async def test_waits_in_a_thread_while_another_writer_holds_the_lock(
    db: Database, tmp_path: Path
) -> None:
    holder = sqlite3.connect(tmp_path / "work.db", isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN IMMEDIATE")
    threads: list[str] = []
    work = asyncio.create_task(quick_work(db, _unit, threads))
    await asyncio.sleep(0.2)
    assert not work.done()  # waiting for the lock, and the loop is free meanwhile
    holder.execute("COMMIT")
    assert await asyncio.wait_for(work, 15) == "done"
    assert threads and threads[-1] != threading.current_thread().name
    assert _count(db) == 1  # once, though it was tried twice
    holder.close()
