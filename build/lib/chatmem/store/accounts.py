"""Account repository: users, API tokens, browser sessions and one-time sign-in links.

Functions take an open SQLAlchemy ``Session`` and never commit (the caller's unit of work
does).  Plain-text secrets are returned exactly once, at creation; afterwards only digests
exist (``chatmem.security.passwords``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from dataclasses import fields as dataclass_fields
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Connection, Executable, and_, bindparam, delete, func, or_, select, update
from sqlalchemy.orm import Session

from chatmem.errors import Conflict, InvalidInput, NotFound, QuotaExceeded, Unauthorized
from chatmem.security.passwords import digest, hash_password, new_secret, verify_password
from chatmem.store.db import Database, connection_of
from chatmem.store.tables.accounts import ApiToken, BrowserSession, SigninLink, User
from chatmem.store.types import utcnow

SESSION_TTL = timedelta(days=30)
SIGNIN_LINK_TTL = timedelta(days=7)
NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@-]{0,99}$")


@dataclass(frozen=True, slots=True)
class UserRecord:
    """An account as its readers see it: every column but the password hash (a record
    carries no credential, not even its digest), only whether there is one."""

    id: str
    name: str
    has_password: bool
    is_admin: bool
    disabled: bool
    locale: str | None
    #: The colour theme chosen ("light", "dark"); None: the system's.
    theme: str | None
    evicted_conversations: int
    evicted_messages: int
    #: USE-5: the user's own limits (None: the deployment's).
    session_limit_usd: float | None
    week_limit_usd: float | None
    created_at: datetime


#: Whom a credential is made for: the account's row or its record (only its id is read).
Account = User | UserRecord


def user_record(user: User) -> UserRecord:
    """The record of an ORM row (after a write)."""
    columns = [field.name for field in dataclass_fields(UserRecord) if field.name != "has_password"]
    values = {name: getattr(user, name) for name in columns}
    return UserRecord(has_password=bool(user.password_hash), **values)


def check_name(name: str) -> str:
    if not NAME_PATTERN.match(name):
        raise InvalidInput(
            "A user name is 1–100 letters, digits, '.', '_', '@' or '-', starting with a letter or digit."
        )
    return name


def new_password_hash(password: str | None) -> str | None:
    """The hash to store for a new password (None: none).  Slow on purpose (argon2): call it
    before opening the write transaction that stores it, never inside one — other users'
    writes would wait for it (issue 25)."""
    if password is None:
        return None
    if not password:
        raise InvalidInput("The password must not be empty.")
    return hash_password(password)


def create_user(
    session: Session, name: str, *, password_hash: str | None = None, is_admin: bool = False
) -> UserRecord:
    """A new user; ``password_hash`` from :func:`new_password_hash`, made beforehand."""
    check_name(name)
    if user_by_name(session, name) is not None:
        raise Conflict(f"A user named {name!r} already exists.")
    user = User(
        name=name,
        password_hash=password_hash,
        is_admin=is_admin,
        evicted_conversations=0,
        evicted_messages=0,
    )
    session.add(user)
    session.flush()
    return user_record(user)


def _column(field: str) -> Any:
    """The record's field as SQL: its column, and ``has_password`` ``bool(password_hash)``."""
    if field == "has_password":
        return and_(User.password_hash.is_not(None), User.password_hash != "")
    return getattr(User, field)


# The record's columns, read as they are (no ORM object is built): the signed-in user is
# looked up by id on every request.
_USER_COLUMNS = select(*(_column(field.name) for field in dataclass_fields(UserRecord)))
_USER_BY_ID = _USER_COLUMNS.where(User.id == bindparam("user_id"))
_USER_BY_NAME = _USER_COLUMNS.where(User.name == bindparam("name"))


def _one_user(session: Session, statement: Executable, values: dict[str, Any]) -> UserRecord | None:
    row = session.execute(statement, values).first()
    return None if row is None else UserRecord(*row)


def user_by_name(session: Session, name: str) -> UserRecord | None:
    return _one_user(session, _USER_BY_NAME, {"name": name})


def user_by_id(session: Session, user_id: str) -> UserRecord | None:
    return _one_user(session, _USER_BY_ID, {"user_id": user_id})


def admin_by_name(session: Session, name: str) -> UserRecord | None:
    """The administrator with this name, None when there is none (or the user is not one)."""
    return _one_user(session, _USER_BY_NAME.where(User.is_admin.is_(True)), {"name": name})


def first_admin(session: Session) -> UserRecord | None:
    """The administrator created first, None when there is none."""
    statement = (
        _USER_COLUMNS.where(User.is_admin.is_(True)).order_by(User.created_at, User.id).limit(1)
    )
    return _one_user(session, statement, {})


def sole_user(session: Session, *, not_prefixed: str) -> UserRecord | None:
    """The only user whose name does not start with ``not_prefixed``, None when there are
    none or several."""
    statement = _USER_COLUMNS.where(~User.name.startswith(not_prefixed)).limit(2)
    users = [UserRecord(*row) for row in session.execute(statement)]
    return users[0] if len(users) == 1 else None


def set_locale(session: Session, user_id: str, locale: str | None) -> UserRecord:
    """The user's interface language (PROJ-4; None: the browser's) is ``locale`` from now
    on; returns the user as it now is."""
    session.execute(update(User).where(User.id == user_id).values(locale=locale))
    user = user_by_id(session, user_id)
    if user is None:  # pragma: no cover - the caller holds the signed-in user
        raise NotFound("user")
    return user


def set_theme(session: Session, user_id: str, theme: str | None) -> UserRecord:
    """The user's colour theme ("light", "dark"; None: the system's) is ``theme`` from now
    on; returns the user as it now is."""
    session.execute(update(User).where(User.id == user_id).values(theme=theme))
    user = user_by_id(session, user_id)
    if user is None:  # pragma: no cover - the caller holds the signed-in user
        raise NotFound("user")
    return user


def require_user(session: Session, name: str) -> UserRecord:
    user = user_by_name(session, name)
    if user is None:
        raise NotFound("user")
    return user


def count_users(session: Session) -> int:
    return session.scalar(select(func.count()).select_from(User)) or 0


_PASSWORD_OF = select(User.id, User.password_hash, User.disabled).where(
    User.name == bindparam("name")
)


def check_password(db: Database, name: str, password: str) -> str:
    """The id of the user whose password this is, or :class:`Unauthorized` (the same answer
    for a wrong password and an unknown name).

    SEC-2: the stored hash is read in a short read transaction that ends before the slow
    argon2 verification starts, so no database lock (least of all SQLite's write lock) is held
    while hashing; an unknown name, or a user without a password, is verified against a dummy
    hash made with the same parameters, so it costs the same time."""
    with db.read_connection() as connection:
        row = connection.execute(_PASSWORD_OF, {"name": name}).first()
    stored = row.password_hash if row is not None else None
    if not verify_password(stored, password) or row is None:
        raise Unauthorized("Wrong user name or password.")
    if row.disabled:
        raise Unauthorized("This account is disabled; ask an administrator.")
    return str(row.id)


# --- API tokens --------------------------------------------------------------------------


def create_api_token(session: Session, user: Account, label: str = "") -> str:
    return new_api_token(session, user, label).token


@dataclass(frozen=True, slots=True)
class TokenRecord:
    """An API token as its owner sees it: never the secret, which is stored as a digest."""

    id: str
    label: str
    created_at: datetime
    #: When a request last came with it (to within a minute or so), None: never.
    last_used_at: datetime | None


@dataclass(frozen=True, slots=True)
class NewToken:
    record: TokenRecord
    #: The secret, shown this once.
    token: str


#: The most API tokens one user may hold (each is a way in: a bound keeps them countable).
MAX_API_TOKENS = 100


def new_api_token(session: Session, user: Account, label: str = "") -> NewToken:
    held = session.scalar(select(func.count()).where(ApiToken.user_id == user.id)) or 0
    if held >= MAX_API_TOKENS:
        raise QuotaExceeded(
            f"You hold {MAX_API_TOKENS} API tokens, the most one user may: revoke one first.",
            limit=MAX_API_TOKENS,
        )
    token = new_secret("cm_")
    row = ApiToken(user_id=user.id, token_hash=digest(token), label=label[:200])
    session.add(row)
    session.flush()
    return NewToken(_token_record(row), token)


def api_tokens(session: Session, user_id: str) -> list[TokenRecord]:
    """The user's API tokens, oldest first."""
    rows = session.scalars(
        select(ApiToken)
        .where(ApiToken.user_id == user_id)
        .order_by(ApiToken.created_at, ApiToken.id)
    )
    return [_token_record(row) for row in rows]


def revoke_api_token(session: Session, user_id: str, token_id: str) -> str:
    """Deletes one of the user's tokens; returns the digest it was stored as (the
    credential caches forget it).  Another user's token, or none, is :class:`NotFound`."""
    row = session.get(ApiToken, token_id)
    if row is None or row.user_id != user_id:
        raise NotFound("token")
    token_hash = row.token_hash
    session.delete(row)
    session.flush()
    return token_hash


def _token_record(row: ApiToken) -> TokenRecord:
    return TokenRecord(row.id, row.label, row.created_at, row.last_used_at)


# Every request authenticates with one of these: built once (building a statement costs
# SQLAlchemy more than SQLite takes to run it).
# A disabled account's tokens and sessions stop working (USE-5): they are not found.
_USER_ID_FOR_TOKEN = (
    select(ApiToken.user_id, ApiToken.id)
    .join(User, User.id == ApiToken.user_id)
    .where(ApiToken.token_hash == bindparam("digest"), User.disabled.is_(False))
)
_BROWSER_SESSION = (
    select(BrowserSession.user_id, BrowserSession.csrf_token, BrowserSession.expires_at)
    .join(User, User.id == BrowserSession.user_id)
    .where(BrowserSession.token_hash == bindparam("digest"), User.disabled.is_(False))
)


def is_active_admin(db: Session | Connection, user_id: str) -> bool:
    """Whether ``user_id`` is an administrator whose account is not disabled (one read)."""
    row = (
        connection_of(db)
        .execute(select(User.is_admin, User.disabled).where(User.id == user_id))
        .first()
    )
    return row is not None and bool(row.is_admin) and not row.disabled


def api_token_owner(db: Session | Connection, token: str) -> tuple[str, str] | None:
    """The user behind ``token`` and the token's id, or None (unknown, revoked, or its user
    disabled)."""
    row = connection_of(db).execute(_USER_ID_FOR_TOKEN, {"digest": digest(token)}).first()
    return (str(row.user_id), str(row.id)) if row is not None else None


def mark_tokens_used(session: Session, used: Mapping[str, datetime]) -> None:
    """Each token's ``last_used_at`` moved on to its time in ``used`` (never back: another
    replica may have seen it later); a token revoked meanwhile is simply not there."""
    if not used:
        return
    session.connection().execute(
        update(ApiToken)
        .where(
            ApiToken.id == bindparam("token_id"),
            or_(ApiToken.last_used_at.is_(None), ApiToken.last_used_at < bindparam("used_at")),
        )
        .values(last_used_at=bindparam("used_at")),
        [{"token_id": token_id, "used_at": at} for token_id, at in used.items()],
    )


# --- Browser sessions --------------------------------------------------------------------


def open_browser_session(
    session: Session, user: Account, *, now: datetime | None = None
) -> tuple[str, str]:
    """Returns ``(session_token, csrf_token)``; both go to cookies, only digests are stored
    for the first (the CSRF token is not a credential by itself)."""
    now = now or utcnow()
    token, csrf = new_secret(), new_secret()
    session.add(
        BrowserSession(
            user_id=user.id,
            token_hash=digest(token),
            csrf_token=csrf,
            created_at=now,
            expires_at=now + SESSION_TTL,
        )
    )
    session.flush()
    return token, csrf


@dataclass(frozen=True, slots=True)
class BrowserLogin:
    """A live browser session: whose it is and the CSRF token its writes must echo."""

    user_id: str
    csrf_token: str
    expires_at: datetime


def browser_session_for(
    db: Session | Connection, token: str, *, now: datetime | None = None
) -> BrowserLogin | None:
    row = connection_of(db).execute(_BROWSER_SESSION, {"digest": digest(token)}).first()
    if row is None or row.expires_at <= (now or utcnow()):
        return None
    return BrowserLogin(row.user_id, row.csrf_token, row.expires_at)


def close_browser_session(session: Session, token: str) -> None:
    session.execute(delete(BrowserSession).where(BrowserSession.token_hash == digest(token)))


# --- One-time sign-in links ----------------------------------------------------------------


def create_signin_link(session: Session, user: Account, *, now: datetime | None = None) -> str:
    now = now or utcnow()
    token = new_secret()
    session.add(
        SigninLink(
            user_id=user.id,
            token_hash=digest(token),
            created_at=now,
            expires_at=now + SIGNIN_LINK_TTL,
        )
    )
    session.flush()
    return token


def redeem_signin_link(session: Session, token: str, *, now: datetime | None = None) -> UserRecord:
    """Marks the link used and returns its user; a used, expired or unknown link is NotFound."""
    now = now or utcnow()
    link = session.scalars(
        select(SigninLink).where(SigninLink.token_hash == digest(token)).with_for_update()
    ).first()
    if link is None or link.used_at is not None or link.expires_at <= now:
        raise NotFound("sign-in link")
    link.used_at = now
    user = session.get(User, link.user_id)
    if user is None:  # pragma: no cover - cascade deletes links with their user
        raise NotFound("sign-in link")
    if user.disabled:
        raise Unauthorized("This account is disabled; ask an administrator.")
    return user_record(user)


def signin_link_pending(session: Session, user: UserRecord) -> bool:
    """Whether the user has never signed in by any means (no password, no used link)."""
    if user.has_password:
        return False
    used = session.scalar(
        select(func.count())
        .select_from(SigninLink)
        .where(SigninLink.user_id == user.id, SigninLink.used_at.is_not(None))
    )
    return not used
