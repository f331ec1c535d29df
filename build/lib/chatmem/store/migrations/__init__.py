"""Alembic migrations shipped inside the package.

Revisions are hand-written and linear with fixed ids (``0001_core``, ``0002_profiles``,
``0003_runs`` …).  :func:`alembic_config` builds the configuration in code so migrations run
from an installed wheel without an ``alembic.ini``; :meth:`chatmem.store.db.Database.migrate`
hands it an open connection through ``config.attributes["connection"]``.
"""

from __future__ import annotations

from alembic.config import Config


def alembic_config() -> Config:
    config = Config()
    config.set_main_option("script_location", "chatmem.store:migrations")
    return config
