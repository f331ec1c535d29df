"""First start: create an administrator and hand out a one-time sign-in link.

When the database has no user at all, an admin named ``admin`` (no password) is created and a
sign-in link is printed.  While that admin has never signed in, every start prints a fresh
link, so a lost or expired link is never a dead end.
"""

from __future__ import annotations

from chatmem.settings import Settings
from chatmem.store import accounts
from chatmem.store.db import Database

FIRST_ADMIN = "admin"


def signin_url(settings: Settings, token: str) -> str:
    return f"{settings.base_url()}/auth/link/{token}"


def first_start(db: Database, settings: Settings) -> str | None:
    """Returns the sign-in URL to print, or None when somebody already signed in."""
    with db.session(write=True) as session:
        if accounts.count_users(session) == 0:
            created = accounts.create_user(session, FIRST_ADMIN, is_admin=True)
            return signin_url(settings, accounts.create_signin_link(session, created))
        admin = accounts.admin_by_name(session, FIRST_ADMIN)
        if admin is None or not accounts.signin_link_pending(session, admin):
            return None
        return signin_url(settings, accounts.create_signin_link(session, admin))


def announce_first_start(db: Database, settings: Settings) -> None:
    """At server start, after the database is open: on the very first start create the admin,
    and while it has never signed in print its one-time sign-in link (CONTRACT: a line with
    the URL)."""
    link = first_start(db, settings)
    if link:
        # print, not log: the newcomer must see it whatever the log level.
        print(f"chatmem: sign in as the administrator with this one-time link: {link}", flush=True)
