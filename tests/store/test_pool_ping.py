"""PostgreSQL: a pooled connection is pinged before use only when it sat idle for a while
(``store.db.ping_when_idle``, which replaced ``pool_pre_ping``'s round trip on every checkout).

A server that closed an idle connection (a restart, a failover, an idle timeout) costs nobody
an error: the ping finds it dead and the pool opens a new one.  A connection back in the pool
only just now goes straight to work — no ping — for the sync engine of the routes and the
asyncio engine of the turns alike."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import Engine, create_engine, text
from sqlalchemy.exc import OperationalError
from sqlalchemy.ext.asyncio import create_async_engine
from tests.support.clock import ManualClock

from chatmem.store.db import normalize_url, ping_when_idle

pytestmark = pytest.mark.parametrize("backend", ["postgresql"])

IDLE_S = 2.0


def _terminate(url: str, pid: int) -> None:
    admin = create_engine(normalize_url(url), isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as connection:
            # With a timeout the server answers once the backend is really gone (no sleep).
            terminated = connection.execute(text(f"SELECT pg_terminate_backend({pid}, 10000)"))
            assert terminated.scalar() is True
    finally:
        admin.dispose()


@pytest.fixture
def one_connection(database_url: str) -> Iterator[tuple[Engine, ManualClock]]:
    clock = ManualClock()
    engine = create_engine(normalize_url(database_url), pool_size=1, max_overflow=0)
    ping_when_idle(engine, IDLE_S, clock)
    yield engine, clock
    engine.dispose()


def _backend_pid(engine: Engine) -> int:
    with engine.connect() as connection:
        return int(connection.execute(text("SELECT pg_backend_pid()")).scalar_one())


def test_an_idle_connection_closed_by_the_server_is_replaced(
    database_url: str, one_connection: tuple[Engine, ManualClock]
) -> None:
    engine, clock = one_connection
    first = _backend_pid(engine)
    _terminate(database_url, first)
    clock.advance(IDLE_S + 1)
    assert _backend_pid(engine) != first  # pinged, found dead, replaced: no error


def test_a_connection_used_just_now_is_not_pinged(
    database_url: str, one_connection: tuple[Engine, ManualClock]
) -> None:
    """The proof that no ping runs: the dead connection reaches the statement (which fails,
    and the pool then drops it, as it did with ``pool_pre_ping`` for a connection that dies
    while in use)."""
    engine, clock = one_connection
    first = _backend_pid(engine)
    _terminate(database_url, first)
    clock.advance(IDLE_S / 2)
    with pytest.raises(OperationalError):
        _backend_pid(engine)
    assert _backend_pid(engine) != first


async def test_the_asyncio_engine_replaces_an_idle_dead_connection(database_url: str) -> None:
    clock = ManualClock()
    engine = create_async_engine(normalize_url(database_url), pool_size=1, max_overflow=0)
    ping_when_idle(engine.sync_engine, IDLE_S, clock)
    try:
        async with engine.connect() as connection:
            first = int((await connection.execute(text("SELECT pg_backend_pid()"))).scalar_one())
        _terminate(database_url, first)
        clock.advance(IDLE_S + 1)
        async with engine.connect() as connection:
            second = int((await connection.execute(text("SELECT pg_backend_pid()"))).scalar_one())
        assert second != first
    finally:
        await engine.dispose()
