"""The database handle: one engine, one session factory, migrations applied on start.

``Database(url)`` accepts SQLAlchemy URLs as users write them (``sqlite:///…``,
``postgresql://…``) and normalises PostgreSQL to psycopg 3.  SQLite connections are tuned on
connect (WAL, foreign keys, a busy timeout) because SQLite forgets pragmas per connection.
:meth:`Database.migrate` runs ``alembic upgrade head`` from the migrations shipped inside the
package (no ``alembic.ini`` needed), under an advisory lock on PostgreSQL so replicas that
start together do not race.  :meth:`Database.session` is the one unit-of-work helper: commit
on success, roll back on any exception.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
import weakref
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, event, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DisconnectionError, OperationalError
from sqlalchemy.ext.asyncio import (
    AsyncEngine,
    AsyncSession,
    async_sessionmaker,
    create_async_engine,
)
from sqlalchemy.orm import Session, sessionmaker
from sqlalchemy.pool import StaticPool

from chatmem.errors import ConfigurationError, missing_driver
from chatmem.security.private_dir import create_private_file, make_private_dir
from chatmem.settings import Settings
from chatmem.store.token_counts import IN_USE_KEY, TokenizersInUse

SQLITE_BUSY_TIMEOUT_MS = 10_000
#: Request sessions and units of work in flight at once, per process (``Database.slots``).
#: The rest wait on the event loop, holding neither a thread nor a connection: a session that
#: has begun needs a thread again to finish (the route's body, its commit), and when every
#: worker thread sat waiting for a pooled connection those sessions held, nothing moved.
SESSION_SLOTS = 32
#: Worker threads: one per slot, and as many again for the short reads that take no slot
#: (authentication, sign-in) and the rest of the app's thread work.
WORKER_THREADS = 2 * SESSION_SLOTS
#: Connections: SQLite, a slot each plus the slot-less short reads (cheap: 8 kept open).
#: PostgreSQL, 32 for requests (a slot-less short read waits briefly for one; it holds
#: nothing another needs) and 16 for the turns' units on the asyncio driver, so two replicas
#: stay under the server's default ``max_connections`` (100).  All of them are kept once
#: opened (no overflow): a connection over the pool's size is closed when it comes back, and
#: under load (100 streams) the turns' pool opened and closed connections all the time — a
#: new PostgreSQL connection costs milliseconds on both sides.
SQLITE_POOL_SIZE = 8
SQLITE_POOL_OVERFLOW = 2 * SESSION_SLOTS - SQLITE_POOL_SIZE
PG_POOL_SIZE = SESSION_SLOTS
PG_POOL_OVERFLOW = 0
PG_ASYNC_POOL_SIZE = 16
PG_ASYNC_POOL_OVERFLOW = 0
SQLITE_MMAP_BYTES = 256 * 1024 * 1024
SQLITE_CACHE_KIB = 32 * 1024
#: PostgreSQL: a pooled connection idle for longer than this is pinged before it is used (a
#: server restart, a failover or an idle timeout may have closed it meanwhile); one back in
#: the pool for less goes straight to work.  ``pool_pre_ping`` pinged on every checkout: a
#: network round trip on each unit of work, two of them on the way to a turn's first token.
PG_PING_AFTER_IDLE_S = 2.0
# Any constant shared by every replica; identifies "chatmem schema migration" for pg locks.
_PG_MIGRATION_LOCK = 7_245_113_901


def normalize_url(url: str) -> str:
    """``postgresql://`` and ``postgres://`` mean psycopg 3 here (the only driver we ship)."""
    for prefix in ("postgresql://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix) :]
    return url


class Database:
    """An engine plus a session factory.  Lives on ``app.state.db``."""

    def __init__(self, url: str, *, echo: bool = False) -> None:
        self.url = normalize_url(url)
        try:
            parsed = make_url(self.url)
        except Exception as exc:
            raise ConfigurationError(f"Malformed database URL: {exc}") from None
        self.dialect = parsed.get_backend_name()
        kwargs: dict[str, Any] = {"echo": echo, "future": True}
        if self.dialect == "sqlite":
            database = parsed.database or ""
            if database and database != ":memory:":
                # SEC-3: a private directory, and the file created 0600 before SQLite opens
                # it (its -wal and -shm files then get the same mode).
                make_private_dir(Path(database).parent)
                create_private_file(Path(database))
            # isolation_level=None: let SQLAlchemy emit BEGIN itself (the pysqlite
            # transaction emulation otherwise defers it and breaks SAVEPOINT/DDL).
            kwargs["connect_args"] = {"check_same_thread": False, "isolation_level": None}
            if not database or database == ":memory:":
                kwargs["poolclass"] = StaticPool
            else:
                # Last in, first out: SQLite drops a connection's page cache whenever another
                # connection wrote since its last transaction, so the connection used last (the
                # last writer, most often) is the one whose cache still holds.  One pool for
                # every unit, the event loop's writers included, for the same reason.
                kwargs.update(
                    pool_size=SQLITE_POOL_SIZE,
                    max_overflow=SQLITE_POOL_OVERFLOW,
                    pool_use_lifo=True,
                )
        elif self.dialect == "postgresql":
            kwargs.update(pool_size=PG_POOL_SIZE, max_overflow=PG_POOL_OVERFLOW)
        else:
            raise ConfigurationError(f"Unsupported database backend: {self.dialect}")
        try:
            self.engine: Engine = create_engine(self.url, **kwargs)
        except ModuleNotFoundError:  # psycopg is the ``postgres`` extra
            raise missing_driver("CHATMEM_DATABASE_URL", "PostgreSQL") from None
        if self.dialect == "postgresql":
            ping_when_idle(self.engine, PG_PING_AFTER_IDLE_S)
        #: Which tokenizers a stored message is counted with, read now and then: one answer
        #: for all of this database's connections (``store.tokens.tokenizers_in_use``).
        self.tokenizers_in_use = TokenizersInUse()
        self._hand_over(self.engine)
        #: SQLite file: the writer connections of :meth:`connection_nowait`, from the same
        #: pool (taken with busy timeout 0).  Not for an in-memory database, which is one
        #: shared connection.
        self._nowait_writer: Engine | None = None
        #: SQLite: this process's writers take turns here, first come first served, before
        #: they ask SQLite for its write lock (see :class:`TaskGate`).
        self.writers = TaskGate(1 if self.dialect == "sqlite" else None)
        #: Sessions and units of work in flight (see :data:`SESSION_SLOTS`).
        self.slots = TaskGate(SESSION_SLOTS)
        #: PostgreSQL: the turns' units on the asyncio pool, one per connection, so a unit on
        #: the way to a first token waits here, ahead of the others, and not in the pool's
        #: own queue (first come, first served).
        self.async_units = TaskGate(PG_ASYNC_POOL_SIZE if self.dialect == "postgresql" else None)
        if self.dialect == "sqlite":
            _tune_sqlite(self.engine, busy_timeout_ms=SQLITE_BUSY_TIMEOUT_MS)
            if "poolclass" not in kwargs:
                self._nowait_writer = self.engine.execution_options(
                    chatmem_begin="IMMEDIATE", chatmem_busy_timeout_ms=0
                )
        self.sessionmaker: sessionmaker[Session] = sessionmaker(self.engine, expire_on_commit=False)
        #: PostgreSQL: the turns' units of work run on the event loop with the asyncio driver
        #: (their sync code in a greenlet, ``AsyncSession.run_sync``), not in worker threads.
        self.async_sessionmaker: async_sessionmaker[AsyncSession] | None = None
        self._async_engine: AsyncEngine | None = None
        if self.dialect == "postgresql":
            self._async_engine = create_async_engine(
                self.url, pool_size=PG_ASYNC_POOL_SIZE, max_overflow=PG_ASYNC_POOL_OVERFLOW
            )
            ping_when_idle(self._async_engine.sync_engine, PG_PING_AFTER_IDLE_S)
            self._hand_over(self._async_engine.sync_engine)
            self.async_sessionmaker = async_sessionmaker(self._async_engine, expire_on_commit=False)
        #: PostgreSQL: the same pool in autocommit, for a unit that is one statement (atomic
        #: by itself): it needs no BEGIN and no COMMIT, two round trips of its three.
        self.async_autocommit: AsyncEngine | None = (
            self._async_engine.execution_options(isolation_level="AUTOCOMMIT")
            if self._async_engine is not None
            else None
        )
        # Writers on SQLite take the write lock when they begin (BEGIN IMMEDIATE), so a
        # read transaction never has to upgrade after another writer committed (which fails
        # at once).  The async callers wait their turn first (``writers``).  Readers stay
        # deferred and never block anybody (WAL).
        self.write_sessionmaker: sessionmaker[Session] = sessionmaker(
            self.engine.execution_options(chatmem_begin="IMMEDIATE")
            if self.dialect == "sqlite"
            else self.engine,
            expire_on_commit=False,
        )

    def _hand_over(self, engine: Engine) -> None:
        """Each new connection of ``engine`` carries this database's shared answers."""

        @event.listens_for(engine, "connect")
        def _on_connect(_dbapi_connection: Any, record: Any) -> None:
            record.info[IN_USE_KEY] = self.tokenizers_in_use

    @classmethod
    def from_settings(cls, settings: Settings) -> Database:
        return cls(settings.sqlalchemy_url())

    @property
    def is_sqlite(self) -> bool:
        return self.dialect == "sqlite"

    @contextmanager
    def session(self, *, write: bool = False) -> Iterator[Session]:
        """A unit of work: committed when the block ends normally, rolled back otherwise.

        Pass ``write=True`` when the block writes (on SQLite it then holds the write lock from
        its first statement, so concurrent writers wait their turn instead of failing)."""
        session = self.new_session(write=write)
        try:
            yield session
        except BaseException:
            end_session(session, commit=False)
            raise
        end_session(session, commit=True)

    def new_session(self, *, write: bool = False) -> Session:
        """A session not begun yet (a writer with ``write``, see :meth:`session`); end it with
        :func:`end_session`."""
        return (self.write_sessionmaker if write else self.sessionmaker)()

    @contextmanager
    def read_connection(self) -> Iterator[Connection]:
        """A Core connection for a short read (one transaction, rolled back at the end):
        what the per-request authentication needs, without an ORM session's bookkeeping."""
        with self.engine.connect() as connection:
            yield connection

    @property
    def can_write_nowait(self) -> bool:
        return self._nowait_writer is not None

    @contextmanager
    def connection_nowait(self) -> Iterator[Connection]:
        """A writer unit on a Core connection that takes the SQLite write lock now or fails
        at once with ``database is locked`` (busy timeout 0): for a short unit of prepared
        statements run on the event loop, which must not sit in the busy handler — the
        caller retries elsewhere.  Committed when the block ends normally."""
        if self._nowait_writer is None:
            raise RuntimeError("connection_nowait needs a SQLite database file")
        with self._nowait_writer.begin() as connection:
            yield connection

    def migrate(self) -> None:
        """Apply every Alembic revision up to head (idempotent)."""
        from alembic import command

        from chatmem.store.migrations import alembic_config

        with self.engine.begin() as connection:
            if self.dialect == "postgresql":
                connection.execute(
                    text("SELECT pg_advisory_xact_lock(:k)"), {"k": _PG_MIGRATION_LOCK}
                )
            config = alembic_config()
            config.attributes["connection"] = connection
            command.upgrade(config, "head")

    def current_revision(self) -> str | None:
        with self.engine.connect() as connection:
            try:
                row = connection.execute(text("SELECT version_num FROM alembic_version")).first()
            except Exception:
                return None
        return row[0] if row else None

    def head_revision(self) -> str | None:
        """The newest revision this code ships (what :meth:`migrate` brings the schema to)."""
        from alembic.script import ScriptDirectory

        from chatmem.store.migrations import alembic_config

        return ScriptDirectory.from_config(alembic_config()).get_current_head()

    def readiness(self) -> str | None:
        """Why this database cannot serve (unreachable, not migrated), or None."""
        try:
            current = self.current_revision()
        except Exception as exc:  # unreachable: the driver's words, no URL (it has a password)
            return f"the database cannot be reached ({type(exc).__name__})"
        head = self.head_revision()
        if current != head:
            return f"the database schema is at {current or 'nothing'}, not {head}"
        return None

    async def aclose(self) -> None:
        """Closes the asyncio pool's connections (on the loop that used them)."""
        if self._async_engine is not None:
            await self._async_engine.dispose()

    def dispose(self) -> None:
        self.engine.dispose()
        if self._async_engine is not None:
            # Its connections can only be closed on their loop (:meth:`aclose`); here the pool
            # is only dropped.
            self._async_engine.sync_engine.dispose(close=False)


def end_session(session: Session, *, commit: bool) -> None:
    """Commits (or rolls back) and closes a unit of work; a failed commit is rolled back."""
    try:
        if commit:
            session.commit()
        else:
            session.rollback()
    except BaseException:
        session.rollback()
        raise
    finally:
        session.close()


def connection_of(db: Session | Connection) -> Connection:
    """The Core connection of a session (or the connection itself), for prepared statements."""
    return db.connection() if isinstance(db, Session) else db


class TaskGate:
    """At most ``size`` tasks of this process inside at once (``None``: no limit); the others
    wait their turn on the event loop, holding neither a thread nor a connection (one
    :class:`Turns` per loop).  A task already inside is not queued again (it would wait for
    itself); tasks it starts queue like any other.

    ``Database.writers`` is one with room for one on SQLite: SQLite has one write lock, and
    its busy handler polls with back-off and is not fair — a burst of 200 writing requests
    used to time out (``database is locked``), and a writer waiting in the handler held a
    worker thread the lock's holder might need to finish.  Other processes (the CLI, a second
    server) still meet SQLite's busy timeout.  ``Database.slots`` bounds the sessions and
    units of work in flight (see :data:`SESSION_SLOTS`).

    Waiters are served first come, first served — except that units on the way to a turn's
    first token (``first=True``: its admission, its first events) go ahead of the others
    (see :class:`Turns`): under a hundred streams the writer's queue is the wait, and the
    first token should not queue behind other turns' later tokens."""

    def __init__(self, size: int | None) -> None:
        self.size = size
        self._turns: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Turns] = (
            weakref.WeakKeyDictionary()
        )
        self._inside: weakref.WeakSet[asyncio.Task[Any]] = weakref.WeakSet()
        #: Told how long each task waited to get in (seconds): the app's metrics.
        self.waited: Callable[[float], None] | None = None

    @asynccontextmanager
    async def hold(self, *, first: bool = False) -> AsyncIterator[None]:
        """Inside the gate for the block (``first``: ahead of the other waiters)."""
        me = asyncio.current_task()
        if self.size is None or me is None or me in self._inside:
            yield
            return
        loop = asyncio.get_running_loop()
        turns = self._turns.get(loop)
        if turns is None:
            turns = self._turns[loop] = Turns(self.size)
        began = time.perf_counter()
        await turns.acquire(first=first)
        if self.waited is not None:
            self.waited(time.perf_counter() - began)
        self._inside.add(me)
        try:
            yield
        finally:
            self._inside.discard(me)
            turns.release()


class Turns:
    """A counting semaphore with two queues, each first come, first served: ``first`` waiters
    are let in ahead of the others, but never more than :attr:`OVERTAKE` in a row while
    another waits — so nobody starves, however many first tokens arrive."""

    OVERTAKE = 4

    def __init__(self, size: int) -> None:
        self._free = size
        self._first: deque[asyncio.Future[None]] = deque()
        self._others: deque[asyncio.Future[None]] = deque()
        self._overtaken = 0  # first waiters let in since the oldest other one began to wait

    async def acquire(self, *, first: bool = False) -> None:
        if self._free > 0 and not self._first and not self._others:
            self._free -= 1
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        queue = self._first if first else self._others
        queue.append(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self.release()  # let in just as it was cancelled: the place goes on
            elif waiter in queue:
                queue.remove(waiter)
            raise

    def release(self) -> None:
        self._free += 1
        while self._free > 0:
            waiter = self._next()
            if waiter is None:
                return
            self._free -= 1
            waiter.set_result(None)

    def _next(self) -> asyncio.Future[None] | None:
        for queue in (self._first, self._others):
            while queue and queue[0].done():  # cancelled while waiting
                queue.popleft()
        if self._first and (not self._others or self._overtaken < self.OVERTAKE):
            self._overtaken = self._overtaken + 1 if self._others else 0
            return self._first.popleft()
        if self._others:
            self._overtaken = 0
            return self._others.popleft()
        return None


def ping_when_idle(
    engine: Engine, idle_s: float, clock: Callable[[], float] = time.monotonic
) -> None:
    """Pings a pooled connection at checkout when it sat in the pool for more than ``idle_s``
    seconds; a dead one is replaced before anybody uses it (the pool retries its checkout on
    :class:`~sqlalchemy.exc.DisconnectionError`).  A connection that dies while in use fails
    that unit of work, and SQLAlchemy then invalidates the rest of the pool, as with
    ``pool_pre_ping``.  Works for the asyncio driver too: checkout runs in the greenlet that
    awaits the driver."""

    @event.listens_for(engine, "checkin")
    def _on_checkin(_dbapi_connection: Any, record: Any) -> None:
        record.info[_IDLE_SINCE] = clock()

    @event.listens_for(engine, "checkout")
    def _on_checkout(dbapi_connection: Any, record: Any, _proxy: Any) -> None:
        since = record.info.pop(_IDLE_SINCE, None)
        if since is None or clock() - since <= idle_s:
            return  # new, or back in the pool only just now
        try:
            alive = engine.dialect.do_ping(dbapi_connection)
        except engine.dialect.loaded_dbapi.Error as exc:
            raise DisconnectionError(f"a pooled connection is gone: {exc}") from exc
        if not alive:
            raise DisconnectionError("a pooled connection is gone")


_IDLE_SINCE = "chatmem_idle_since"


_BUSY_TIMEOUT_KEY = "chatmem_busy_timeout_ms"


def _tune_sqlite(engine: Engine, *, busy_timeout_ms: int) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute(f"PRAGMA busy_timeout={busy_timeout_ms}")
        cursor.execute("PRAGMA synchronous=NORMAL")
        # Random reads (full-text hits → messages → conversations) dominate search on big
        # databases: read through the OS page cache (mmap) and keep a larger page cache.
        cursor.execute(f"PRAGMA mmap_size={SQLITE_MMAP_BYTES}")
        cursor.execute(f"PRAGMA cache_size=-{SQLITE_CACHE_KIB}")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(connection: Any) -> None:
        # Straight to the driver: every unit of work begins here, and SQLAlchemy's statement
        # machinery costs a hundred times what SQLite takes for a BEGIN.  A failure (the
        # write lock is busy) is wrapped like any statement error (``OperationalError``).
        options = connection.get_execution_options()
        immediate = options.get("chatmem_begin") == "IMMEDIATE"
        # The busy timeout this unit waits for the write lock (``connection_nowait``: none);
        # set only when it differs from the connection's.
        wait = int(options.get("chatmem_busy_timeout_ms", busy_timeout_ms))
        record = connection.connection
        if record.info.get(_BUSY_TIMEOUT_KEY, busy_timeout_ms) != wait:
            record.driver_connection.execute(f"PRAGMA busy_timeout={wait}")
            record.info[_BUSY_TIMEOUT_KEY] = wait
        try:
            connection.connection.driver_connection.execute(
                "BEGIN IMMEDIATE" if immediate else "BEGIN"
            )
        except sqlite3.Error as exc:
            raise OperationalError("BEGIN", None, exc) from exc
