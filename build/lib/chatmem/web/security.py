"""Response hardening and safe redirects (SEC-3).

:class:`SecurityHeadersMiddleware` gives every HTTP response (pages, API, static files,
errors) a strict Content-Security-Policy — scripts, styles and connections from this origin
only, no inline script or style attribute, no plugins, no ``<base>``, frames only of this
site (the chat page frames ``/apps/sandbox``, the one page that may be framed: APPS-2), never
framed — with
``X-Frame-Options: DENY`` for old browsers, ``X-Content-Type-Options: nosniff``,
``Referrer-Policy: same-origin`` and, with ``CHATMEM_SECURE_COOKIES=1`` (the site is served
over HTTPS), ``Strict-Transport-Security``.  A response that sets its own policy keeps it
(a downloaded file's ``sandbox``).  The API docs page is Swagger UI from ``static/vendor``
under the same policy.

:func:`safe_next_path` is the one place that decides where a browser goes after signing in:
a path on this site, in the form a browser's URL parser gives it (dot segments removed, also
percent-encoded ones, characters percent-encoded as a browser would).  Checking the raw value
is not enough: ``/.//evil.example`` starts with one slash, yet a browser resolves it to the
path ``//evil.example``, which ``location.assign`` (or any code that re-serialises the path)
reads as another host.  ``static/signin.js`` makes no decision of its own: it asks this server
(``/?next=…``) and follows its redirect.
"""

from __future__ import annotations

import html
from urllib.parse import unquote, urlsplit

from fastapi import FastAPI, Request
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
        "frame-src 'self'",
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


#: What a browser percent-encodes in a URL's path, query and fragment besides non-ASCII
#: (WHATWG URL's encode sets, less what :func:`safe_next_path` refuses or splits on).
_PATH_ENCODE = frozenset('"<>`{}')
_QUERY_ENCODE = frozenset("\"<>'")
_FRAGMENT_ENCODE = frozenset('"<>`')
_SINGLE_DOT = frozenset({".", "%2e"})
_DOUBLE_DOT = frozenset({"..", ".%2e", "%2e.", "%2e%2e"})


def _percent_encode(text: str, encode: frozenset[str]) -> str:
    """``text`` with the characters a browser would encode encoded (non-ASCII as UTF-8)."""
    return "".join(
        "".join(f"%{byte:02X}" for byte in ch.encode("utf-8"))
        if ch in encode or ord(ch) > 0x7E
        else ch
        for ch in text
    )


def _remove_dot_segments(path: str) -> str:
    """``path`` (starting with ``/``) as a browser stores it: ``.`` and ``..`` segments (also
    written ``%2e``) removed, a trailing one leaving the path ending in ``/``."""
    segments = path[1:].split("/")
    kept: list[str] = []
    for index, segment in enumerate(segments):
        last = index == len(segments) - 1
        if segment.lower() in _DOUBLE_DOT:
            if kept:
                kept.pop()
            if last:
                kept.append("")
        elif segment.lower() in _SINGLE_DOT:
            if last:
                kept.append("")
        else:
            kept.append(segment)
    return "/" + "/".join(kept)


def _refused(ch: str) -> bool:
    # Controls and whitespace (browsers drop tabs and newlines: "/\t/host" is "//host"),
    # the invisible separators, and backslashes (browsers read them as "/"): a path on this
    # site reaches us with each of them percent-encoded, never raw.
    return ord(ch) <= 0x20 or 0x7F <= ord(ch) <= 0x9F or ch in "\\\u2028\u2029\ufeff"


def safe_next_path(value: str | None) -> str:
    """Where to send a browser after signing in: ``value`` as the path on this site a
    browser's URL parser makes of it, or ``/`` when it is not one.

    Refused: anything not starting with one ``/`` (schemes, relative paths, ``//host``
    however it goes on: ``//..`` is the host ``..``, not a path); control characters,
    whitespace and backslashes anywhere; over-long values; and every path that, normalised,
    starts with ``//`` (another host to a browser: ``//host``, ``/.//host``, ``/x/..//host``,
    ``/%2e//host``) — or would once a server decoded its ``%2F``/``%5C``/``%2E``
    (``/%2F/host``, ``/%5Chost``).  The answer is a fixed point of browsers' URL parsing:
    they navigate to exactly this path."""
    if not value or len(value) > MAX_NEXT or not value.startswith("/") or value.startswith("//"):
        return "/"
    if any(_refused(ch) for ch in value):
        return "/"
    # A lone surrogate cannot be UTF-8 encoded; browsers read it as U+FFFD.
    value = value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    rest, hash_sign, fragment = value.partition("#")
    path, question_mark, query = rest.partition("?")
    path = _remove_dot_segments(_percent_encode(path, _PATH_ENCODE))
    decoded = _remove_dot_segments(unquote(path).replace("\\", "/"))
    if path.startswith("//") or decoded.startswith("//"):
        return "/"
    result = (
        path
        + question_mark
        + _percent_encode(query, _QUERY_ENCODE)
        + hash_sign
        + _percent_encode(fragment, _FRAGMENT_ENCODE)
    )
    return result if len(result) <= MAX_NEXT else "/"


#: The vendored Swagger UI (``static/vendor``, see its ``SOURCES.md``).
SWAGGER_UI_VERSION = "5.35.0"

_API_DOCS_PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title>
<link rel="icon" href="{static}/favicon.svg" type="image/svg+xml">
<link rel="stylesheet" href="{static}/vendor/swagger-ui-{version}.css">
</head>
<body>
<div id="swagger-ui" data-openapi-url="{openapi_url}"></div>
<script src="{static}/vendor/swagger-ui-bundle-{version}.js"></script>
<script src="{static}/api-docs.js?v={chatmem_version}"></script>
</body>
</html>
"""


def install_api_docs(app: FastAPI, path: str = "/api/docs") -> None:
    """Swagger UI at ``path``, from this site's own files: the page works offline and runs
    under the site's policy (no other host, nothing inline)."""

    @app.get(path, include_in_schema=False)
    async def api_docs(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "")
        page = _API_DOCS_PAGE.format(
            title=html.escape(f"{app.title} API"),
            static=html.escape(root + "/static"),
            version=SWAGGER_UI_VERSION,
            openapi_url=html.escape(root + (app.openapi_url or "/openapi.json")),
            chatmem_version=html.escape(app.version),
        )
        return HTMLResponse(page)
