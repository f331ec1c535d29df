"""Response hardening and safe redirects (SEC-3).

:class:`SecurityHeadersMiddleware` gives every HTTP response (pages, API, static files,
errors) a strict Content-Security-Policy — scripts, styles and connections from this origin
only, no inline script or style attribute, no plugins, no ``<base>``, never framed — with
``X-Frame-Options: DENY`` for old browsers, ``X-Content-Type-Options: nosniff``,
``Referrer-Policy: same-origin`` and, with ``CHATMEM_SECURE_COOKIES=1`` (the site is served
over HTTPS), ``Strict-Transport-Security``.  A response that sets its own policy keeps it
(a downloaded file's ``sandbox``, the API docs page's nonce).

:func:`safe_next_path` is the one rule for where a browser may be sent after signing in: a
path on this site.  ``static/signin.js`` applies the same rule again before it navigates.
"""

from __future__ import annotations

import secrets
from typing import Any
from urllib.parse import urlsplit

from fastapi import FastAPI, Request
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

#: The pages' policy: everything from this origin, nothing inline, never framed.  Images may
#: also be data: and blob: URLs (attachment previews); ``element.style`` set from our own
#: scripts (meters, widths) is CSSOM and needs no ``unsafe-inline``.
CONTENT_SECURITY_POLICY = "; ".join(
    [
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self' data: blob:",
        "font-src 'self'",
        "connect-src 'self'",
        "media-src 'self' blob:",
        "object-src 'none'",
        "base-uri 'none'",
        "form-action 'self'",
        "frame-src 'none'",
        "frame-ancestors 'none'",
    ]
)
HSTS = "max-age=31536000"
#: Longest ``next`` accepted (a path on this site is never longer).
MAX_NEXT = 2048


def _headers(secure: bool) -> list[tuple[bytes, bytes]]:
    out = [
        (b"content-security-policy", CONTENT_SECURITY_POLICY.encode()),
        (b"x-frame-options", b"DENY"),
        (b"x-content-type-options", b"nosniff"),
        (b"referrer-policy", b"same-origin"),
    ]
    if secure:
        out.append((b"strict-transport-security", HSTS.encode()))
    return out


class SecurityHeadersMiddleware:
    """Adds the hardening headers to every HTTP response that does not set them itself."""

    def __init__(self, app: ASGIApp, *, secure: bool = False) -> None:
        self.app = app
        self._headers = _headers(secure)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                present = {name.lower() for name, _ in headers}
                headers += [(k, v) for k, v in self._headers if k not in present]
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_with_headers)


def posted_from_this_site(request: Request) -> bool:
    """Whether a form post came from a page of this site.  A post from another site's page
    could sign a visitor in as somebody else (login CSRF); browsers say where a post comes
    from (``Sec-Fetch-Site``, or at least ``Origin``, ``null`` for an opaque one).  A client
    that sends neither is no browser, so no visitor of another site."""
    site = request.headers.get("sec-fetch-site")
    if site is not None:
        return site == "same-origin"
    origin = request.headers.get("origin")
    if origin is None:
        return True
    return urlsplit(origin).netloc == request.headers.get("host", "")


def safe_next_path(value: str | None) -> str:
    """``value`` when it is a path on this site, else ``/``.

    Refused: anything not starting with one ``/`` (schemes, ``//host``, relative paths), a
    backslash anywhere (browsers read ``/\\host`` as ``//host``), control characters and
    whitespace (browsers drop tabs and newlines: ``/\\t/host`` is ``//host``), and
    over-long values."""
    if not value or len(value) > MAX_NEXT or not value.startswith("/"):
        return "/"
    if value.startswith("//") or "\\" in value:
        return "/"
    if any(ord(ch) <= 0x20 or 0x7F <= ord(ch) <= 0x9F for ch in value):
        return "/"
    if any(ch in value for ch in ("\u2028", "\u2029", "\ufeff")):
        return "/"
    return value


def install_api_docs(app: FastAPI, path: str = "/api/docs") -> None:
    """Swagger UI at ``path`` under its own policy: its one inline script runs by nonce,
    its bundle and stylesheet come from the CDN FastAPI names; nothing else inline."""

    @app.get(path, include_in_schema=False)
    async def api_docs(request: Request) -> HTMLResponse:
        nonce = secrets.token_urlsafe(16)
        root = request.scope.get("root_path", "")
        page = get_swagger_ui_html(
            openapi_url=root + (app.openapi_url or "/openapi.json"),
            title=f"{app.title} - Swagger UI",
        )
        body = bytes(page.body).decode("utf-8").replace("<script>", f'<script nonce="{nonce}">')
        policy = "; ".join(
            [
                "default-src 'none'",
                f"script-src https://cdn.jsdelivr.net 'nonce-{nonce}'",
                "style-src https://cdn.jsdelivr.net",
                "img-src 'self' data: https:",
                "font-src https://cdn.jsdelivr.net data:",
                "connect-src 'self'",
                "base-uri 'none'",
                "form-action 'none'",
                "frame-ancestors 'none'",
            ]
        )
        headers: dict[str, Any] = {"Content-Security-Policy": policy}
        return HTMLResponse(body, headers=headers)
