"""API test fixtures, shared by every room (registered in ``tests/conftest.py``).

- ``backend`` — ``"sqlite"`` or ``"postgresql"``; the API suite runs once per backend.
  PostgreSQL gets a fresh database per test session (``chatmem_test_<random>``), migrated
  once and emptied between tests; unreachable → :func:`skip_or_fail`.
- ``database_url`` — the URL for this test (SQLite: a file in the test's state directory).
- ``settings`` — a :class:`Settings` for this test; override fields with
  ``settings.model_copy(update=…)`` before building an app.
- ``app`` / ``client`` — ``create_app(settings)`` and a started ``TestClient`` (lifespan run:
  database migrated, first admin created).
- ``make_user(client, name, admin=False) -> ApiUser`` — a user with an API token;
  ``ApiUser.headers`` is the ``Authorization`` header.  Also available as fixture ``user`` /
  ``other_user`` (two users for STORE-1 tests).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import create_engine, text
from tests.conftest import skip_or_fail

from chatmem.settings import Settings
from chatmem.store import accounts
from chatmem.store.db import Database, normalize_url
from chatmem.web.app import create_app

POSTGRES_ADMIN_URL = os.environ.get(
    "CHATMEM_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"
)
BACKENDS = ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)]


@dataclass(frozen=True)
class ApiUser:
    id: str
    name: str
    token: str

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}


def make_user(
    client: TestClient, name: str, *, admin: bool = False, password: str | None = None
) -> ApiUser:
    """Creates a user directly in the app's database and returns it with a fresh API token."""
    db: Database = client.app.state.db  # type: ignore[attr-defined]
    with db.session() as session:
        user = accounts.create_user(
            session, name, password_hash=accounts.new_password_hash(password), is_admin=admin
        )
        token = accounts.create_api_token(session, user, label="test")
        return ApiUser(id=user.id, name=user.name, token=token)


class _PostgresPool:
    """One throwaway database per test session; tables emptied between tests."""

    def __init__(self) -> None:
        self.url: str | None = None
        self.error: str | None = None
        self._name = f"chatmem_test_{uuid.uuid4().hex[:12]}"

    def open(self) -> str:
        if self.url is None and self.error is None:
            try:
                admin = create_engine(
                    normalize_url(POSTGRES_ADMIN_URL), isolation_level="AUTOCOMMIT"
                )
                with admin.connect() as conn:
                    conn.execute(text(f'CREATE DATABASE "{self._name}"'))
                admin.dispose()
            except Exception as exc:
                self.error = f"PostgreSQL unreachable at {POSTGRES_ADMIN_URL}: {type(exc).__name__}"
            else:
                base = POSTGRES_ADMIN_URL.rsplit("/", 1)[0]
                self.url = f"{base}/{self._name}"
                db = Database(self.url)
                db.migrate()
                db.dispose()
        if self.error:
            skip_or_fail(self.error)
        assert self.url is not None
        return self.url

    def empty(self) -> None:
        if self.url is None:
            return
        db = Database(self.url)
        with db.engine.begin() as conn:
            tables = [
                r[0]
                for r in conn.execute(
                    text(
                        "SELECT tablename FROM pg_tables WHERE schemaname = 'public' "
                        "AND tablename <> 'alembic_version'"
                    )
                )
            ]
            if tables:
                conn.execute(text("TRUNCATE " + ", ".join(f'"{t}"' for t in tables) + " CASCADE"))
        db.dispose()

    def close(self) -> None:
        if self.url is None:
            return
        admin = create_engine(normalize_url(POSTGRES_ADMIN_URL), isolation_level="AUTOCOMMIT")
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{self._name}" WITH (FORCE)'))
        admin.dispose()


@pytest.fixture(scope="session")
def _postgres_pool() -> Iterator[_PostgresPool]:
    pool = _PostgresPool()
    yield pool
    pool.close()


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def database_url(backend: str, _postgres_pool: _PostgresPool, clean_environ: Path) -> Iterator[str]:
    if backend == "sqlite":
        yield f"sqlite:///{clean_environ / 'chatmem.db'}"
        return
    url = _postgres_pool.open()
    try:
        yield url
    finally:
        _postgres_pool.empty()


@pytest.fixture
def settings(database_url: str, clean_environ: Path) -> Settings:
    return Settings(state_dir=clean_environ, database_url=database_url)


@pytest.fixture
def app(settings: Settings) -> FastAPI:
    return create_app(settings)


@pytest.fixture
def client(app: FastAPI) -> Iterator[TestClient]:
    with TestClient(app) as test_client:
        yield test_client


@pytest.fixture
def user(client: TestClient) -> ApiUser:
    return make_user(client, "alice")


@pytest.fixture
def other_user(client: TestClient) -> ApiUser:
    return make_user(client, "mallory")
