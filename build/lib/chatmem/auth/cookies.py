"""The browser session's two cookies and the CSRF double-submit rule.

``chatmem_session`` is HttpOnly (scripts cannot read the credential); ``chatmem_csrf`` is
readable by the page's JavaScript, which echoes it in the ``X-CSRF-Token`` header on every
write.  A cross-site page can make the browser *send* cookies but cannot *read* them, so it
cannot produce the header.  Bearer-token requests carry no ambient credential and skip it.
"""

from __future__ import annotations

from starlette.responses import Response

from chatmem.store.accounts import SESSION_TTL

SESSION_COOKIE = "chatmem_session"
CSRF_COOKIE = "chatmem_csrf"
CSRF_HEADER = "X-CSRF-Token"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def set_session_cookies(response: Response, token: str, csrf: str, *, secure: bool) -> None:
    max_age = int(SESSION_TTL.total_seconds())
    response.set_cookie(
        SESSION_COOKIE,
        token,
        max_age=max_age,
        httponly=True,
        secure=secure,
        samesite="lax",
        path="/",
    )
    response.set_cookie(
        CSRF_COOKIE, csrf, max_age=max_age, httponly=False, secure=secure, samesite="lax", path="/"
    )


def clear_session_cookies(response: Response) -> None:
    response.delete_cookie(SESSION_COOKIE, path="/")
    response.delete_cookie(CSRF_COOKIE, path="/")
