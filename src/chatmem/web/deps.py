"""Request dependencies, as ``Annotated`` aliases routes declare in their signatures.

- ``SettingsDep`` — the app's :class:`~chatmem.settings.Settings`.
- ``DatabaseDep`` — the :class:`~chatmem.store.db.Database` on ``app.state.db``.
- ``DbSession`` — one SQLAlchemy ``Session`` per request (a writer for non-GET methods),
  committed when the route returns
  normally and rolled back when it raises (so a refused request writes nothing).  Its exit
  runs before the response is sent (``scope="function"``), so a client never sees an answer
  for a write that was not committed.
- ``CurrentUser`` — the authenticated :class:`~chatmem.store.tables.accounts.User`: a Bearer
  token, or the browser session cookie with the CSRF double-submit check on writes.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated

from fastapi import Depends, Request
from sqlalchemy import Connection
from sqlalchemy.orm import Session

from chatmem.auth.cookies import CSRF_COOKIE, CSRF_HEADER, SAFE_METHODS, SESSION_COOKIE
from chatmem.auth.secrets import same
from chatmem.errors import Forbidden, Unauthorized
from chatmem.settings import Settings
from chatmem.store import accounts
from chatmem.store.db import Database
from chatmem.store.tables.accounts import User


def get_settings(request: Request) -> Settings:
    return request.app.state.settings


def get_database(request: Request) -> Database:
    return request.app.state.db


SettingsDep = Annotated[Settings, Depends(get_settings)]
DatabaseDep = Annotated[Database, Depends(get_database)]


def get_db_session(request: Request, db: DatabaseDep) -> Iterator[Session]:
    # Requests that may write start as writers (see Database.session); reads never block.
    with db.session(write=request.method not in SAFE_METHODS) as session:
        yield session


DbSession = Annotated[Session, Depends(get_db_session, scope="function")]


def authenticated_user_id(request: Request, session: Session | Connection) -> str:
    """Who is asking: the user behind the Bearer token, or behind the browser session cookie
    (with the CSRF double-submit check on writes).  One indexed lookup, no ORM row — the
    turn routes need only the id, on the way to the first token."""
    header = request.headers.get("authorization", "")
    if header:
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise Unauthorized("Use 'Authorization: Bearer TOKEN'.")
        user_id = accounts.user_id_for_api_token(session, token.strip())
        if user_id is None:
            raise Unauthorized("Unknown or revoked API token.")
        return user_id
    cookie = request.cookies.get(SESSION_COOKIE)
    if not cookie:
        raise Unauthorized("Sign in first.")
    browser = accounts.browser_session_for(session, cookie)
    if browser is None:
        raise Unauthorized("Your session has expired; sign in again.")
    if request.method not in SAFE_METHODS:
        sent = request.headers.get(CSRF_HEADER, "")
        if (
            not sent
            or not same(sent, browser.csrf_token)
            or not same(sent, request.cookies.get(CSRF_COOKIE, ""))
        ):
            raise Forbidden("Missing or wrong CSRF token.")
    return browser.user_id


def get_current_user(request: Request, session: DbSession) -> User:
    user = session.get(User, authenticated_user_id(request, session))
    if user is None:  # pragma: no cover - tokens and sessions cascade with their user
        raise Unauthorized("Sign in first.")
    return user


CurrentUser = Annotated[User, Depends(get_current_user, scope="function")]


def require_admin(user: CurrentUser) -> User:
    if not user.is_admin:
        raise Forbidden("Administrators only.")
    return user


AdminUser = Annotated[User, Depends(require_admin, scope="function")]
