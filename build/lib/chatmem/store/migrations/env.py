"""Alembic environment: always runs on the connection handed in by ``Database.migrate``."""

from __future__ import annotations

from alembic import context

from chatmem.store.base import Base

connection = context.config.attributes.get("connection")
if connection is None:  # pragma: no cover - only reachable from a bare `alembic` command
    raise RuntimeError("run migrations through chatmem.store.db.Database.migrate()")

context.configure(
    connection=connection,
    target_metadata=Base.metadata,
    render_as_batch=connection.dialect.name == "sqlite",
    transactional_ddl=True,
)
with context.begin_transaction():
    context.run_migrations()
