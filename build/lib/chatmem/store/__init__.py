"""The storage room: SQLAlchemy models (``tables/``), Alembic migrations, repositories,
archive files and export/import.  Depends on ``chatmem.context`` and nothing above it."""
