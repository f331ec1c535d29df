"""Fixtures for the exchange tests: the app's database for this backend, and users in it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from tests.exchange.builders import open_db

from chatmem.settings import Settings
from chatmem.store.db import Database


@pytest.fixture
def db(settings: Settings) -> Iterator[Database]:
    settings.state_dir.mkdir(parents=True, exist_ok=True)
    database = open_db(settings.sqlalchemy_url())
    yield database
    database.dispose()
