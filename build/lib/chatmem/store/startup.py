"""Opening the store at server start: state directory (private, SEC-3), database, migrations.
The first administrator is the server's start-up's (``chatmem.auth.bootstrap``), after this."""

from __future__ import annotations

import logging
from pathlib import Path

from sqlalchemy.engine import make_url

from chatmem.security.private_dir import make_private_dir, sqlite_files, warn_if_exposed
from chatmem.settings import Settings
from chatmem.store.db import Database
from chatmem.store.exchange.staged import Transactions, sweep_stale

log = logging.getLogger(__name__)


def open_database(settings: Settings) -> Database:
    """Create the state directory, open and migrate the database, and finish what imports cut
    short by a crash left staged."""
    make_private_dir(settings.state_dir)
    db = Database.from_settings(settings)
    db.migrate()
    sweep_stale(Transactions(db))  # what imports cut short by a crash left staged
    # SEC-3: say so when an older install (or an operator) left state readable by others.
    database = make_url(db.url).database if db.is_sqlite else None
    extra = sqlite_files(Path(database)) if database and database != ":memory:" else ()
    warn_if_exposed(settings.state_dir, extra)
    return db
