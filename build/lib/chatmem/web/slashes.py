"""Trailing-slash redirects that name no host (SEC-3).

A path that matches a route only with a trailing slash added or taken away (``/api/v1/
profiles/``, ``/static``) is answered with a 307 to the other form.  Starlette builds that
``Location`` as an absolute URL from the request's ``Host`` header, which any client sets: a
cache in front of chatmem could keep a redirect to another site for everybody, and a proxy
that forwards whatever ``Host`` it gets would send its users there.  :func:`install_slash_redirects`
turns Starlette's redirect off and answers the same requests itself, with a path-absolute
``Location`` made of the request's path and query alone (the browser keeps the scheme and
host it used).  Such a ``Location`` must never start with ``//`` (a browser reads ``//host``
as another site), so a path whose other form would is not redirected: it is a 404 like any
other unknown path.
"""

from __future__ import annotations

from urllib.parse import quote

from fastapi import FastAPI
from starlette.responses import RedirectResponse
from starlette.routing import BaseRoute, Match
from starlette.types import Receive, Scope, Send

#: Characters a path keeps unencoded in the ``Location`` (RFC 3986 ``pchar`` and ``/``);
#: everything else, the backslash and ``%`` included, is percent-encoded.
_PATH_SAFE = "/:@!$&'()*+,;=-._~"


def other_form(scope: Scope, routes: list[BaseRoute]) -> str | None:
    """The ``Location`` that sends an HTTP request to the route it missed by a trailing
    slash: the path with its slash added or taken away, relative, with the query; ``None``
    when no route takes that form either, or when it would start with ``//``."""
    path: str = scope["path"]
    root: str = scope.get("root_path", "")
    route_path = path[len(root) :] if root and path.startswith(root) else path
    if route_path in ("", "/"):
        return None
    other = path.rstrip("/") if path.endswith("/") else path + "/"
    if not other.startswith("/") or other.startswith("//"):
        return None
    candidate = {**scope, "path": other}
    if not any(route.matches(candidate)[0] is not Match.NONE for route in routes):
        return None
    location = quote(other, safe=_PATH_SAFE)
    query: bytes = scope.get("query_string", b"")
    # The query as it came, already encoded: only what may not stand in a URL is encoded.
    return location + "?" + quote(query, safe=_PATH_SAFE + "?%") if query else location


def install_slash_redirects(app: FastAPI) -> None:
    """Answer a request that missed a route by its trailing slash with a relative 307,
    instead of Starlette's redirect to the ``Host`` the client named."""
    router = app.router
    router.redirect_slashes = False
    not_found = router.default

    async def redirect_or_not_found(scope: Scope, receive: Receive, send: Send) -> None:
        location = other_form(scope, router.routes) if scope["type"] == "http" else None
        if location is None:
            await not_found(scope, receive, send)
            return
        await RedirectResponse(location, status_code=307)(scope, receive, send)

    router.default = redirect_or_not_found
