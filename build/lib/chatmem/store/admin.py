"""What administrators do (USE-5), each act recorded in ``admin_actions`` with who and when.

Every function here takes the acting administrator and writes its audit row in the same
transaction as the change, so a change without its record (or a record of a change that was
rolled back) cannot exist.  Passwords never reach the record: only that one was reset.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from chatmem.errors import Conflict, InvalidInput, NotFound
from chatmem.store import accounts
from chatmem.store.accounts import UserRecord, user_record
from chatmem.store.exchange.staged import STAGING_PREFIX
from chatmem.store.ledger import EXTENSION_SCOPES, ExtensionRecord, extension_record
from chatmem.store.tables.accounts import BrowserSession, SigninLink, User
from chatmem.store.tables.admin import AdminAction
from chatmem.store.tables.runs import ExtensionRequest
from chatmem.store.types import utcnow

#: The largest amount one grant or one limit may be (USD): a typo, not a budget, beyond it.
MAX_USD = 1_000_000.0


def record(
    session: Session,
    admin: UserRecord,
    action: str,
    target_type: str,
    target_id: str | None,
    details: dict[str, Any] | None = None,
    *,
    now: datetime | None = None,
) -> None:
    row = AdminAction(
        admin_id=admin.id,
        admin_name=admin.name,
        action=action,
        target_type=target_type,
        target_id=target_id,
        details=details or {},
        created_at=now or utcnow(),
    )
    session.add(row)
    session.flush()


@dataclass(frozen=True, slots=True)
class ActionRecord:
    """One entry of the audit trail: who (their name as it was), did what, to what, when."""

    id: str
    admin_id: str | None
    admin_name: str
    action: str
    target_type: str
    target_id: str | None
    details: dict[str, Any]
    created_at: datetime


def actions(session: Session, *, limit: int = 200) -> list[ActionRecord]:
    """The audit trail, newest first."""
    rows = session.scalars(
        select(AdminAction)
        .order_by(AdminAction.created_at.desc(), AdminAction.id.desc())
        .limit(limit)
    )
    return [
        ActionRecord(
            row.id,
            row.admin_id,
            row.admin_name,
            row.action,
            row.target_type,
            row.target_id,
            row.details,
            row.created_at,
        )
        for row in rows
    ]


def usd(value: float | None, name: str, *, positive: bool = False) -> float | None:
    """A USD amount from a request: finite, not negative (above zero when ``positive``)."""
    if value is None:
        return None
    if not math.isfinite(value) or value < 0 or value > MAX_USD or (positive and value == 0):
        raise InvalidInput(
            f"{name}: must be a number of USD {'above' if positive else 'from'} 0 "
            f"up to {MAX_USD:,.0f}."
        )
    return round(float(value), 8)


# --- extension requests --------------------------------------------------------------------


def _pending_request(session: Session, request_id: str) -> ExtensionRequest:
    row = session.get(ExtensionRequest, request_id)
    if row is None:
        raise NotFound("extension request")
    if row.status != "pending":
        raise Conflict(f"This request was already {row.status}.")
    return row


def grant_extension(
    session: Session, admin: UserRecord, request_id: str, amount_usd: float, scope: str
) -> ExtensionRecord:
    """Grants ``amount_usd`` more included usage for the current period or permanently:
    it raises both the session and the weekly included usage (see :mod:`chatmem.store.ledger`)."""
    if scope not in EXTENSION_SCOPES:
        raise InvalidInput(f"scope: use one of {', '.join(EXTENSION_SCOPES)}.")
    amount = usd(amount_usd, "amount_usd", positive=True)
    row = _pending_request(session, request_id)
    now = utcnow()
    row.status, row.amount_usd, row.scope = "granted", amount, scope
    row.decided_by, row.decided_at = admin.id, now
    record(
        session,
        admin,
        "grant_extension",
        "extension_request",
        row.id,
        {"user_id": row.user_id, "amount_usd": amount, "scope": scope},
        now=now,
    )
    return extension_record(row)


def decline_extension(session: Session, admin: UserRecord, request_id: str) -> ExtensionRecord:
    row = _pending_request(session, request_id)
    now = utcnow()
    row.status, row.decided_by, row.decided_at = "declined", admin.id, now
    record(
        session,
        admin,
        "decline_extension",
        "extension_request",
        row.id,
        {"user_id": row.user_id},
        now=now,
    )
    return extension_record(row)


# --- users ---------------------------------------------------------------------------------


def all_users(session: Session) -> list[UserRecord]:
    """Every account (not an import's staging owner: ``store.exchange.staged``), by name."""
    accounts_only = ~User.name.startswith(STAGING_PREFIX)
    rows = session.scalars(select(User).where(accounts_only).order_by(User.name))
    return [user_record(row) for row in rows]


def add_user(
    session: Session, admin: UserRecord, name: str, password_hash: str | None, is_admin: bool
) -> UserRecord:
    """A new user; ``password_hash`` made before the transaction (``new_password_hash``)."""
    user = accounts.create_user(session, name, password_hash=password_hash, is_admin=is_admin)
    record(session, admin, "add_user", "user", user.id, {"name": user.name, "is_admin": is_admin})
    return user


def _sign_out_everywhere(session: Session, user: User) -> None:
    """Ends the user's browser sessions and unused sign-in links (API tokens stay)."""
    session.execute(delete(BrowserSession).where(BrowserSession.user_id == user.id))
    session.execute(
        delete(SigninLink).where(SigninLink.user_id == user.id, SigninLink.used_at.is_(None))
    )


def update_user(
    session: Session, admin: UserRecord, user_id: str, changes: dict[str, Any]
) -> UserRecord:
    """Applies the keys present in ``changes``: ``disabled``, ``password_hash`` (a new
    password's, made before the transaction: ``accounts.new_password_hash``), ``is_admin``,
    ``session_limit_usd`` / ``week_limit_usd`` (None: back to the deployment's limits).
    Disabling the account or resetting its password signs it out everywhere."""
    user = session.get(User, user_id)
    if user is None:
        raise NotFound("user")
    details: dict[str, Any] = {}
    if "disabled" in changes and changes["disabled"] is not None:
        disabled = bool(changes["disabled"])
        if disabled and user.id == admin.id:
            raise InvalidInput("An administrator cannot disable their own account.")
        user.disabled = disabled
        details["disabled"] = disabled
        if disabled:  # tokens stay but do not work while disabled
            _sign_out_everywhere(session, user)
    if "is_admin" in changes and changes["is_admin"] is not None:
        if not changes["is_admin"] and user.id == admin.id:
            raise InvalidInput("An administrator cannot remove their own administrator role.")
        user.is_admin = bool(changes["is_admin"])
        details["is_admin"] = user.is_admin
    if changes.get("password_hash") is not None:
        user.password_hash = changes["password_hash"]
        details["password"] = "reset"
        _sign_out_everywhere(session, user)  # whoever knew the old one is out
    for name in ("session_limit_usd", "week_limit_usd"):
        if name in changes:
            value = usd(changes[name], name)
            setattr(user, name, value)
            details[name] = value
    if not details:
        raise InvalidInput("Nothing to change.")
    session.flush()
    record(session, admin, "update_user", "user", user.id, {"name": user.name, **details})
    return user_record(user)
