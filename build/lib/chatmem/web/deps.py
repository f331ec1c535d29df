"""Request dependencies, as ``Annotated`` aliases routes declare in their signatures.

- ``SettingsDep`` — the app's :class:`~chatmem.settings.Settings`.
- ``DatabaseDep`` — the :class:`~chatmem.store.db.Database` on ``app.state.db``.
- ``DbSession`` — one database ``Session`` per request (a writer for non-GET methods),
  committed when the route returns
  normally and rolled back when it raises (so a refused request writes nothing).  Its exit
  runs before the response is sent (``scope="function"``), so a client never sees an answer
  for a write that was not committed.
- ``CurrentUser`` — the authenticated user's :class:`~chatmem.store.accounts.UserRecord`: a Bearer
  token, or the browser session cookie with the CSRF double-submit check on writes.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Literal, cast

import anyio
from fastapi import Depends, Request

from chatmem.auth.cookies import CSRF_COOKIE, CSRF_HEADER, SAFE_METHODS, SESSION_COOKIE
from chatmem.errors import Forbidden, Unauthorized
from chatmem.security.passwords import digest, same
from chatmem.settings import Settings
from chatmem.store import accounts
from chatmem.store.accounts import UserRecord
from chatmem.store.db import Database, end_session
from chatmem.store.sessions import Connection, Session
from chatmem.store.types import utcnow


def get_settings(request: Request) -> Settings:
    return cast(Settings, request.app.state.settings)


def get_database(request: Request) -> Database:
    return cast(Database, request.app.state.db)


SettingsDep = Annotated[Settings, Depends(get_settings)]
DatabaseDep = Annotated[Database, Depends(get_database)]


async def get_db_session(request: Request, db: DatabaseDep) -> AsyncIterator[Session]:
    """Requests that may write start as writers (see ``Database.session``) once it is their
    turn (``Database.writers``: on SQLite a burst of writers queues on the event loop, first
    come first served, holding no thread, instead of failing); reads never wait.  Committed
    when the route returns normally, rolled back when it raises, in a worker thread."""
    write = request.method not in SAFE_METHODS
    async with db.slots.hold(), db.writers.hold() if write else nullcontext():
        session = db.new_session(write=write)
        try:
            yield session
        except BaseException:
            await anyio.to_thread.run_sync(lambda: end_session(session, commit=False))
            raise
        await anyio.to_thread.run_sync(lambda: end_session(session, commit=True))


DbSession = Annotated[Session, Depends(get_db_session, scope="function")]


#: Seconds a checked credential is trusted without asking the database again.  A logout
#: takes effect at once on the replica that served it, and within this time on the others.
CREDENTIAL_TTL = 5.0


#: What a cached credential is, so each works only in its own place: an API token only as a
#: Bearer token, a browser session only as the session cookie (with the CSRF check on writes).
CredentialKind = Literal["token", "session"]


@dataclass(frozen=True)
class _Checked:
    kind: CredentialKind
    user_id: str
    csrf_token: str | None  # browser sessions only
    until: float  # time.monotonic()


class CredentialCache:
    """Credentials checked in the last few seconds, by the digest of the secret.

    Every API request authenticates, and a turn is two requests (submit, then the events
    stream) on the way to the first token: without this each paid a database lookup.  Small
    and bounded; a browser session is never trusted past its own expiry."""

    def __init__(self, ttl: float = CREDENTIAL_TTL, size: int = 4096) -> None:
        self._ttl = ttl
        self._size = size
        self._items: OrderedDict[str, _Checked] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, secret: str, kind: CredentialKind) -> _Checked | None:
        """The check of ``secret`` as a credential of ``kind``, if one is fresh: a session
        cookie presented as a Bearer token (or a token as a cookie) is not one."""
        key = digest(secret)
        with self._lock:
            found = self._items.get(key)
            if found is None or found.kind != kind:
                return None
            if found.until <= time.monotonic():
                del self._items[key]
                return None
            return found

    def knows(self, request: Request) -> bool:
        """Whether the request's credential (Bearer token, else session cookie) was checked
        in the last few seconds: authenticating it then asks no database."""
        scheme, secret = _presented_credential(request)
        kind: CredentialKind = "session" if scheme is None else "token"
        return bool(secret) and self.get(secret, kind) is not None

    def put(
        self,
        secret: str,
        kind: CredentialKind,
        user_id: str,
        csrf_token: str | None = None,
        expires_at: datetime | None = None,
    ) -> None:
        lifetime = self._ttl
        if expires_at is not None:
            lifetime = min(lifetime, (expires_at - utcnow()).total_seconds())
        if lifetime <= 0:
            return
        checked = _Checked(kind, user_id, csrf_token, time.monotonic() + lifetime)
        key = digest(secret)
        with self._lock:
            self._items[key] = checked
            self._items.move_to_end(key)
            while len(self._items) > self._size:
                self._items.popitem(last=False)

    def forget(self, secret: str) -> None:
        self.forget_digest(digest(secret))

    def forget_digest(self, key: str) -> None:
        """Drops a credential known by the digest it is stored as (a revoked API token)."""
        with self._lock:
            self._items.pop(key, None)

    def forget_user(self, user_id: str) -> None:
        """Drops every credential of this user (a disabled account, USE-5)."""
        with self._lock:
            for key in [k for k, v in self._items.items() if v.user_id == user_id]:
                del self._items[key]


@contextmanager
def _reader(request: Request, db: Session | Connection | None) -> Iterator[Session | Connection]:
    if db is not None:
        yield db
    else:
        with request.app.state.db.read_connection() as connection:
            yield connection


def _presented_credential(request: Request) -> tuple[str | None, str]:
    """The credential a request presents: the ``Authorization`` header's scheme and token, or
    (None, the session cookie) when it sends no such header."""
    header = request.headers.get("authorization", "")
    if header:
        scheme, _, token = header.partition(" ")
        return scheme, token.strip()
    return None, request.cookies.get(SESSION_COOKIE, "")


def authenticated_user_id(request: Request, db: Session | Connection | None = None) -> str:
    """Who is asking: the user behind the Bearer token, or behind the browser session cookie
    (with the CSRF double-submit check on writes).  A credential checked in the last few
    seconds is not looked up again (:class:`CredentialCache`); otherwise one indexed lookup
    through ``db``, or a short read connection when none is given."""
    cache: CredentialCache = request.app.state.credentials
    scheme, secret = _presented_credential(request)
    if scheme is not None:
        token = secret
        if scheme.lower() != "bearer" or not token:
            raise Unauthorized("Use 'Authorization: Bearer TOKEN'.")
        hit = cache.get(token, "token")
        if hit is not None:
            return hit.user_id
        with _reader(request, db) as reader:
            owner = accounts.api_token_owner(reader, token)
        if owner is None:
            raise Unauthorized("Unknown or revoked API token.")
        user_id, token_id = owner
        request.app.state.token_use.seen(token_id)  # written a minute or so later
        cache.put(token, "token", user_id)
        return user_id
    cookie = secret
    if not cookie:
        raise Unauthorized("Sign in first.")
    checked = cache.get(cookie, "session")
    if checked is None:
        with _reader(request, db) as reader:
            browser = accounts.browser_session_for(reader, cookie)
        if browser is None:
            raise Unauthorized("Your session has expired; sign in again.")
        cache.put(cookie, "session", browser.user_id, browser.csrf_token, browser.expires_at)
        user_id, csrf_token = browser.user_id, browser.csrf_token
    else:
        user_id, csrf_token = checked.user_id, checked.csrf_token or ""
    if request.method not in SAFE_METHODS:
        sent = request.headers.get(CSRF_HEADER, "")
        if (
            not sent
            or not same(sent, csrf_token)
            or not same(sent, request.cookies.get(CSRF_COOKIE, ""))
        ):
            raise Forbidden("Missing or wrong CSRF token.")
    return user_id


def get_current_user(request: Request, session: DbSession) -> UserRecord:
    user = accounts.user_by_id(session, authenticated_user_id(request, session))
    if user is None:  # pragma: no cover - tokens and sessions cascade with their user
        raise Unauthorized("Sign in first.")
    if user.disabled:  # USE-5: even within the credential cache's few seconds
        raise Unauthorized("This account is disabled; ask an administrator.")
    return user


CurrentUser = Annotated[UserRecord, Depends(get_current_user, scope="function")]


def require_admin(user: CurrentUser) -> UserRecord:
    if not user.is_admin:
        raise Forbidden("Administrators only.")
    return user


AdminUser = Annotated[UserRecord, Depends(require_admin, scope="function")]
