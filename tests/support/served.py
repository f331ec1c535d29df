"""A real ``chatmem serve`` for the hostile-input tests (SEC-1): on SQLite or on a fresh
PostgreSQL database, with no way off loopback (``tests.support.offline``), and its memory
read from ``/proc``."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

from sqlalchemy import create_engine, text
from tests.conftest import skip_or_fail
from tests.support.app import POSTGRES_ADMIN_URL
from tests.support.serve import ServeProcess

from chatmem.store.db import normalize_url


class PostgresUnreachable(Exception):
    """No database could be created at the admin URL (its message says why)."""


@contextmanager
def throwaway_postgres(admin_url: str, prefix: str) -> Iterator[str]:
    """A new, empty PostgreSQL database beside ``admin_url``'s, named ``prefix_<random>``;
    dropped afterwards.  :class:`PostgresUnreachable` when it cannot be created."""
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    admin = create_engine(normalize_url(admin_url), isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{name}"'))
    except Exception as exc:
        admin.dispose()
        raise PostgresUnreachable(
            f"PostgreSQL unreachable at {admin_url}: {type(exc).__name__}"
        ) from None
    try:
        yield f"{admin_url.rsplit('/', 1)[0]}/{name}"
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


@contextmanager
def postgres_database() -> Iterator[str]:
    """A new, empty PostgreSQL database for one server process; dropped afterwards
    (unreachable: :func:`skip_or_fail`)."""
    with ExitStack() as stack:
        try:
            url = stack.enter_context(throwaway_postgres(POSTGRES_ADMIN_URL, "chatmem_serve"))
        except PostgresUnreachable as exc:
            skip_or_fail(str(exc))
            raise
        yield url


@contextmanager
def served(state: Path, backend: str, **env: str) -> Iterator[ServeProcess]:
    """``chatmem serve`` (offline) on ``backend`` ("sqlite" or "postgresql"), started."""
    if backend == "postgresql":
        with postgres_database() as url, served_on(state, CHATMEM_DATABASE_URL=url, **env) as s:
            yield s
        return
    with served_on(state, **env) as server:
        yield server


@contextmanager
def served_on(state: Path, **env: str) -> Iterator[ServeProcess]:
    server = ServeProcess(state, module="tests.support.offline", **env)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def memory(pid: int) -> dict[str, int]:
    """The process's resident memory now (``rss``) and at its peak (``hwm``), in bytes."""
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            fields["rss" if key == "VmRSS" else "hwm"] = int(value.split()[0]) * 1024
    return fields
