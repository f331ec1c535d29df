"""Fixtures for the store tests: a migrated database of each kind (``database_url``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from chatmem.store.db import Database


@pytest.fixture
def db(database_url: str) -> Iterator[Database]:
    database = Database(database_url)
    database.migrate()
    yield database
    database.dispose()
