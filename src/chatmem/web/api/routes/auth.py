"""Signing in and out, the one-time sign-in link, and ``/api/v1/me``.

``POST /api/v1/auth/login`` checks a name and password and opens a browser session (cookies,
see :mod:`chatmem.auth.cookies`); ``GET /auth/link/{token}`` redeems a one-time link, opens a
session and redirects to ``/``; ``POST /api/v1/auth/logout`` closes the session.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.responses import RedirectResponse

from chatmem.auth.cookies import SESSION_COOKIE, clear_session_cookies, set_session_cookies
from chatmem.store import accounts
from chatmem.web.api.schemas import Body, user_public
from chatmem.web.deps import CurrentUser, DbSession, SettingsDep

router = APIRouter(tags=["auth"])


class Login(Body):
    name: str
    password: str


@router.post("/api/v1/auth/login")
def login(
    body: Login, session: DbSession, settings: SettingsDep, response: Response
) -> dict[str, Any]:
    user = accounts.authenticate(session, body.name, body.password)
    token, csrf = accounts.open_browser_session(session, user)
    set_session_cookies(response, token, csrf, secure=settings.secure_cookies)
    return {"user": user_public(user), "csrf_token": csrf}


@router.post("/api/v1/auth/logout", status_code=204)
def logout(request: Request, user: CurrentUser, session: DbSession) -> Response:
    token = request.cookies.get(SESSION_COOKIE)
    if token:
        accounts.close_browser_session(session, token)
        request.app.state.credentials.forget(token)
    response = Response(status_code=204)
    clear_session_cookies(response)
    return response


@router.get("/auth/link/{token}", include_in_schema=False)
def signin_link(token: str, session: DbSession, settings: SettingsDep) -> Response:
    user = accounts.redeem_signin_link(session, token)
    session_token, csrf = accounts.open_browser_session(session, user)
    response = RedirectResponse("/", status_code=303)
    set_session_cookies(response, session_token, csrf, secure=settings.secure_cookies)
    return response


@router.get("/api/v1/me")
def me(user: CurrentUser) -> dict[str, Any]:
    return user_public(user)
