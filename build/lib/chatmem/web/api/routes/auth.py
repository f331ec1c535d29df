"""Signing in and out, the one-time sign-in link, and ``/api/v1/me``.

``POST /api/v1/auth/login`` checks a name and password and opens a browser session (cookies,
see :mod:`chatmem.auth.cookies`), throttled per name and per client address
(:mod:`chatmem.auth.throttle`): :func:`sign_in`, which the sign-in page's own form post uses
too (:mod:`chatmem.web.ui.routes`, as is the one-time link); ``POST /api/v1/auth/logout``
closes the session.
"""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, Request, Response
from starlette.concurrency import run_in_threadpool

from chatmem.auth.cookies import SESSION_COOKIE, clear_session_cookies, set_session_cookies
from chatmem.auth.throttle import SigninThrottle
from chatmem.errors import InvalidInput, Unauthorized
from chatmem.store import accounts
from chatmem.store.db import Database
from chatmem.web.api.schemas import Body, user_public
from chatmem.web.deps import CurrentUser, DbSession, SettingsDep

router = APIRouter(tags=["auth"])


class Login(Body):
    name: str
    password: str


async def sign_in(request: Request, name: str, password: str) -> tuple[str, str, dict[str, Any]]:
    """SEC-2: a browser session for ``name`` if ``password`` is theirs — its token, its CSRF
    token and the user as the API shows them.  Throttled per name and per client address
    (:class:`~chatmem.auth.throttle.SigninThrottled`, not counted); a wrong name or password
    is :class:`~chatmem.errors.Unauthorized`.  The password is verified outside any database
    transaction, and the session is recorded after, in a short write."""
    state = request.app.state
    throttle: SigninThrottle = state.signin_throttle
    address = state.trusted_proxies.client_address(
        request.client.host if request.client else None, request.headers.get("x-forwarded-for")
    )
    db: Database = state.db
    ticket = await throttle.admit(name, address)
    user_id = await run_in_threadpool(accounts.check_password, db, name, password)
    await throttle.succeeded(ticket)
    return await run_in_threadpool(_open_session, db, user_id)


def _open_session(db: Database, user_id: str) -> tuple[str, str, dict[str, Any]]:
    with db.session(write=True) as session:
        user = accounts.user_by_id(session, user_id)
        if user is None:  # deleted between the check and now
            raise Unauthorized("Wrong user name or password.")
        token, csrf = accounts.open_browser_session(session, user)
        return token, csrf, user_public(user)


@router.post(
    "/api/v1/auth/login",
    responses={429: {"description": "Too many failed sign-ins (`rate_limited`, Retry-After)"}},
)
async def login(
    body: Login, request: Request, settings: SettingsDep, response: Response
) -> dict[str, Any]:
    """SEC-2: :func:`sign_in` (``429 rate_limited`` with ``Retry-After`` when throttled)."""
    token, csrf, user = await sign_in(request, body.name, body.password)
    set_session_cookies(response, token, csrf, secure=settings.secure_cookies)
    return {"user": user, "csrf_token": csrf}


@router.post("/api/v1/auth/logout", status_code=204)
def logout(request: Request, user: CurrentUser, session: DbSession) -> Response:
    token = request.cookies.get(SESSION_COOKIE)
    if token:
        accounts.close_browser_session(session, token)
        request.app.state.credentials.forget(token)
    response = Response(status_code=204)
    clear_session_cookies(response)
    return response


@router.get("/api/v1/me")
def me(user: CurrentUser) -> dict[str, Any]:
    return user_public(user)


class MeUpdate(Body):
    #: The interface language (PROJ-4): one of ``en``, ``ru``, ``it``, ``id``; ``null`` lets
    #: the browser's ``Accept-Language`` decide.
    locale: Literal["en", "ru", "it", "id"] | None = None
    #: The colour theme: ``system`` follows the browser's ``prefers-color-scheme``.
    theme: Literal["system", "light", "dark"] | None = None


@router.patch("/api/v1/me")
def update_me(body: MeUpdate, user: CurrentUser, session: DbSession) -> dict[str, Any]:
    """The user's own settings: the interface language and the colour theme; a field left
    out is kept as it is."""
    given = body.model_fields_set
    if not given:
        raise InvalidInput("Nothing to change: give locale or theme.")
    if "theme" in given and body.theme is None:
        raise InvalidInput("theme is one of system, light, dark.")
    record: accounts.UserRecord = user
    if "locale" in given:
        record = accounts.set_locale(session, user.id, body.locale)
    if body.theme is not None:
        theme = None if body.theme == "system" else body.theme
        record = accounts.set_theme(session, user.id, theme)
    return user_public(record)
