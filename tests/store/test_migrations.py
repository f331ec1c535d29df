"""Migrations: applied on start, idempotent, and in step with the table models."""

from __future__ import annotations

from pathlib import Path

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext

from chatmem.store.base import Base
from chatmem.store.db import Database
from chatmem.store.tables import load_all


def _is_dialect_extra(diff: object) -> bool:
    # Full-text objects are created by hand per dialect (FTS5 tables, a GIN expression index).
    return "fts" in repr(diff)


def test_migrations_are_idempotent_and_match_the_models(database_url: str) -> None:
    db = Database(database_url)
    db.migrate()
    head = db.current_revision()
    db.migrate()  # a second start changes nothing
    assert db.current_revision() == head
    load_all()
    with db.engine.connect() as connection:
        diffs = compare_metadata(MigrationContext.configure(connection), Base.metadata)
    db.dispose()
    assert [d for d in diffs if not _is_dialect_extra(d)] == []


def test_sqlite_connections_use_wal_and_foreign_keys(tmp_path: Path) -> None:
    db = Database(f"sqlite:///{tmp_path}/x.db")
    with db.engine.connect() as connection:
        assert connection.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert connection.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
        assert connection.exec_driver_sql("PRAGMA busy_timeout").scalar() > 0
    db.dispose()


def test_postgres_urls_are_normalised_to_psycopg() -> None:
    from chatmem.store.db import normalize_url

    assert normalize_url("postgresql://u@h/db") == "postgresql+psycopg://u@h/db"
    assert normalize_url("postgres://u@h/db") == "postgresql+psycopg://u@h/db"
    assert normalize_url("sqlite:///x.db") == "sqlite:///x.db"
