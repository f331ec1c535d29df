"""Opening the store at server start: state directory, database, migrations, first admin."""

from __future__ import annotations

import logging

from chatmem.auth.bootstrap import first_start
from chatmem.settings import Settings
from chatmem.store.db import Database

log = logging.getLogger(__name__)


def open_database(settings: Settings, *, announce: bool = True) -> Database:
    """Create the state directory, open and migrate the database, and on the very first start
    create the admin and print its one-time sign-in link (CONTRACT: a line with the URL)."""
    settings.state_dir.mkdir(parents=True, exist_ok=True)
    db = Database.from_settings(settings)
    db.migrate()
    link = first_start(db, settings)
    if link and announce:
        # print, not log: the newcomer must see it whatever the log level.
        print(f"chatmem: sign in as the administrator with this one-time link: {link}", flush=True)
    return db
