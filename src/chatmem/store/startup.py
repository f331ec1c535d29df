"""Opening the store at server start: state directory (private, SEC-3), database, migrations,
first admin."""

from __future__ import annotations

import logging
from pathlib import Path

from sqlalchemy.engine import make_url

from chatmem.auth.bootstrap import first_start
from chatmem.security.private_dir import make_private_dir, sqlite_files, warn_if_exposed
from chatmem.settings import Settings
from chatmem.store.db import Database
from chatmem.store.exchange.staged import Transactions, sweep_stale

log = logging.getLogger(__name__)


def open_database(settings: Settings, *, announce: bool = True) -> Database:
    """Create the state directory, open and migrate the database, and on the very first start
    create the admin and print its one-time sign-in link (CONTRACT: a line with the URL)."""
    make_private_dir(settings.state_dir)
    db = Database.from_settings(settings)
    db.migrate()
    sweep_stale(Transactions(db))  # what imports cut short by a crash left staged
    # SEC-3: say so when an older install (or an operator) left state readable by others.
    database = make_url(db.url).database if db.is_sqlite else None
    extra = sqlite_files(Path(database)) if database and database != ":memory:" else ()
    warn_if_exposed(settings.state_dir, extra)
    link = first_start(db, settings)
    if link and announce:
        # print, not log: the newcomer must see it whatever the log level.
        print(f"chatmem: sign in as the administrator with this one-time link: {link}", flush=True)
    return db
