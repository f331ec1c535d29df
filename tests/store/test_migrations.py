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


def test_upgrading_a_populated_sqlite_database_keeps_every_row(tmp_path: Path) -> None:
    """An upgrade from the last released revision loses nothing.  On SQLite a batch
    "recreate" drops the old table first, and with foreign keys on, dropping ``users`` deletes
    every conversation (ON DELETE CASCADE): migrations add columns in place instead."""
    from alembic import command
    from sqlalchemy import text

    from chatmem.store.migrations import alembic_config

    db = Database(f"sqlite:///{tmp_path}/old.db")

    def upgrade(revision: str) -> None:
        with db.engine.begin() as connection:
            config = alembic_config()
            config.attributes["connection"] = connection
            command.upgrade(config, revision)

    upgrade("0007_attachments_recount")
    then = "'2026-01-01 00:00:00'"
    with db.engine.begin() as c:
        c.execute(
            text(
                "INSERT INTO users (id, name, password_hash, is_admin, evicted_conversations, "
                f"evicted_messages, created_at) VALUES ('u1', 'ann', 'x', 0, 0, 0, {then})"
            )
        )
        c.execute(
            text(
                "INSERT INTO conversations (id, user_id, title, pinned, mode, instructions, "
                f"created_at, updated_at, last_active_at) VALUES ('c1', 'u1', 'Kept', 0, "
                f"'full', '', {then}, {then}, {then})"
            )
        )
        c.execute(
            text(
                "INSERT INTO messages (id, conversation_id, seq, role, content, created_at, "
                "tokens_estimate, tokens_o200k, tokens_cl100k, excluded) VALUES ('m1', 'c1', "
                f"1, 'user', 'Still here', {then}, 3, 3, 3, 0)"
            )
        )
    db.migrate()
    with db.engine.connect() as c:
        assert c.execute(text("SELECT title FROM conversations")).scalars().all() == ["Kept"]
        assert c.execute(text("SELECT content FROM messages")).scalars().all() == ["Still here"]
        assert c.execute(text("SELECT name FROM users")).scalars().all() == ["ann"]
    db.dispose()
