"""``/api/v1/admin/…``: the admin console's API (USE-5), administrators only (``forbidden``).

- ``extension-requests``: every user's "Request extension", pending first; ``grant`` gives
  more included usage for the current period or permanently, ``decline`` says no — the user
  sees the outcome in ``GET /api/v1/usage`` (``requests``).
- ``users``: add, disable (signed out at once, tokens stop working), reset a password, set
  the user's own limits; each with the user's usage now.
- ``profiles``: the shared profiles with their "Auto" order (``auto_rank``).
- ``actions``: the audit trail — everything done through these routes, with who and when.
MCP servers and their health are ``/api/v1/mcp-servers``; tool calls ``/api/v1/admin/tool-calls``.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Query, Request
from pydantic import Field
from starlette.concurrency import run_in_threadpool

from chatmem.errors import Forbidden
from chatmem.store import accounts, admin
from chatmem.store import profiles as profile_store
from chatmem.store.accounts import UserRecord
from chatmem.store.ledger import all_requests
from chatmem.store.profiles import ProfileRecord
from chatmem.turns.usage import user_usage_brief
from chatmem.web.api.schemas import Body, Whole
from chatmem.web.deps import AdminUser, DbSession, SettingsDep, authenticated_user_id
from chatmem.web.views.admin import action_view, user_admin_view
from chatmem.web.views.usage import request_public, usage_brief_public

router = APIRouter(prefix="/api/v1/admin", tags=["admin"])

Usd = Annotated[float, Field(ge=0, le=admin.MAX_USD, allow_inf_nan=False)]


class Grant(Body):
    amount_usd: Annotated[float, Field(gt=0, le=admin.MAX_USD, allow_inf_nan=False)]
    scope: Literal["period", "permanent"] = "period"


class UserCreate(Body):
    name: Annotated[str, Field(min_length=1, max_length=100)]
    password: Annotated[str, Field(min_length=1, max_length=1024)] | None = None
    is_admin: bool = False


class UserUpdate(Body):
    disabled: bool | None = None
    password: Annotated[str, Field(min_length=1, max_length=1024)] | None = None
    is_admin: bool | None = None
    session_limit_usd: Usd | None = None
    week_limit_usd: Usd | None = None


def _check_admin_by_read(request: Request) -> None:
    user_id = authenticated_user_id(request)  # a short read, or the credential cache
    with request.app.state.db.read_connection() as connection:
        if not accounts.is_active_admin(connection, user_id):
            raise Forbidden("Administrators only.")


async def _hashed(request: Request, password: str | None) -> str | None:
    """A new password's hash, made before the route takes the write slot: argon2 takes a few
    hundred milliseconds that every other user's write would otherwise wait for.  Only for an
    administrator (checked with a read first), so nobody else can make the server hash."""
    if password is None:
        return None
    await run_in_threadpool(_check_admin_by_read, request)
    return await run_in_threadpool(accounts.new_password_hash, password)


async def _new_user_hash(request: Request, body: UserCreate) -> str | None:
    return await _hashed(request, body.password)


async def _reset_hash(request: Request, body: UserUpdate) -> str | None:
    return await _hashed(request, body.password)


# Declared before the route's AdminUser and DbSession: dependencies resolve in that order.
NewUserHash = Annotated[str | None, Depends(_new_user_hash)]
ResetHash = Annotated[str | None, Depends(_reset_hash)]


class ProfileRank(Body):
    auto_rank: Annotated[int, Field(ge=1, le=1000)] | None = None


# --- extension requests --------------------------------------------------------------------


@router.get("/extension-requests")
def list_extension_requests(
    _: AdminUser,
    session: DbSession,
    status: Annotated[Literal["pending", "granted", "declined"] | None, Query()] = None,
) -> dict[str, Any]:
    rows = all_requests(session, status)
    return {"items": [request_public(r.request, r.user_name) for r in rows]}


@router.post("/extension-requests/{request_id}/grant")
def grant_extension(
    request_id: str, body: Grant, user: AdminUser, session: DbSession
) -> dict[str, Any]:
    return request_public(
        admin.grant_extension(session, user, request_id, body.amount_usd, body.scope)
    )


@router.post("/extension-requests/{request_id}/decline")
def decline_extension(request_id: str, user: AdminUser, session: DbSession) -> dict[str, Any]:
    return request_public(admin.decline_extension(session, user, request_id))


# --- users ---------------------------------------------------------------------------------


def _user_view(session: DbSession, user: UserRecord, settings: SettingsDep) -> dict[str, Any]:
    usage = usage_brief_public(user_usage_brief(session, user.id, settings))
    return {**user_admin_view(user), "usage": usage}


@router.get("/users")
def list_users(_: AdminUser, session: DbSession, settings: SettingsDep) -> dict[str, Any]:
    """Every user with their limits and their usage now (USE-5)."""
    return {"items": [_user_view(session, u, settings) for u in admin.all_users(session)]}


@router.post("/users", status_code=201)
def add_user(
    body: UserCreate,
    password_hash: NewUserHash,
    user: AdminUser,
    session: DbSession,
    settings: SettingsDep,
) -> dict[str, Any]:
    created = admin.add_user(session, user, body.name, password_hash, body.is_admin)
    return _user_view(session, created, settings)


@router.patch("/users/{user_id}")
def change_user(
    user_id: str,
    body: UserUpdate,
    password_hash: ResetHash,
    request: Request,
    user: AdminUser,
    session: DbSession,
    settings: SettingsDep,
) -> dict[str, Any]:
    changes = {name: getattr(body, name) for name in body.model_fields_set - {"password"}}
    if password_hash is not None:
        changes["password_hash"] = password_hash
    changed = admin.update_user(session, user, user_id, changes)
    if changed.disabled or password_hash is not None:
        # Signed out: this replica stops trusting the account's recently checked credentials
        # at once (others within the cache's few seconds).
        request.app.state.credentials.forget_user(changed.id)
    return _user_view(session, changed, settings)


# --- shared profiles and Auto's order ------------------------------------------------------


def _profile_view(row: ProfileRecord) -> dict[str, Any]:
    return {
        "id": row.id,
        "name": row.name,
        "model": row.model,
        "free": row.free,
        "input_price_per_mtok": row.input_price_per_mtok,
        "output_price_per_mtok": row.output_price_per_mtok,
        "auto_rank": row.auto_rank,
    }


@router.get("/profiles")
def list_shared_profiles(_: AdminUser, session: DbSession) -> dict[str, Any]:
    """The shared profiles, in Auto's order (unranked ones last)."""
    return {"items": [_profile_view(r) for r in profile_store.shared_profiles(session)]}


@router.patch("/profiles/{profile_id}")
def rank_profile(
    profile_id: str, body: ProfileRank, user: AdminUser, session: DbSession
) -> dict[str, Any]:
    """Sets a shared profile's place in Auto's order (``null``: Auto never picks it)."""
    row = profile_store.set_auto_rank(session, profile_id, body.auto_rank)
    admin.record(
        session,
        user,
        "rank_profile",
        "profile",
        row.id,
        {"name": row.name, "auto_rank": body.auto_rank},
    )
    return _profile_view(row)


# --- the audit trail -----------------------------------------------------------------------


@router.get("/actions")
def list_actions(
    _: AdminUser,
    session: DbSession,
    limit: Annotated[int, Field(ge=1, le=1000), Whole] = 200,
) -> dict[str, Any]:
    """Everything administrators did, newest first, with who and when."""
    return {"items": [action_view(a) for a in admin.actions(session, limit=limit)]}
