"""The MCP Apps sandbox proxy page, ``GET /apps/sandbox`` (APPS-2), and the bridge's script.

An app's HTML never runs on chatmem's origin.  The chat page frames this page (the *outer*
frame); its own Content-Security-Policy carries ``sandbox allow-scripts`` (no
``allow-same-origin``), so the browser gives it an opaque origin although its URL is
chatmem's: no cookies, no storage, no ``/api`` with the user's session, no reach into the
chat page.  Its script (``static/apps_sandbox.js``) renders the app's HTML, which the chat page
hands it, in an inner frame (``srcdoc``, sandboxed the same way, a second opaque origin) and
relays the JSON-RPC messages both ways — the sandbox-proxy pattern of MCP Apps
(``ui/notifications/sandbox-proxy-ready``, then ``…/sandbox-resource-ready``).

The inner frame inherits this page's policy, so it is the app's too, built from the domains
the resource declares (its ``_meta.ui.csp``), passed as repeated query parameters:
``connect`` (fetch, XHR, WebSocket), ``resource`` (scripts, styles, images, fonts, media),
``frame`` (nested frames) and ``base`` (``<base href>``); none declared, none allowed.  Each
must be an ``https://`` origin or a bare host name (read as ``https://``), a ``*.`` wildcard
for subdomains allowed, ``wss://`` too for ``connect``; anything else (another scheme, a
path, a quote or a space that would end the source list) is left out, as are values past
:data:`MAX_DOMAINS` per kind.  Inline script and style are allowed (apps are single HTML
files), eval is not; the only script of chatmem's the policy admits is the proxy's own, by
its full path.  The page needs no session and reads none.
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence
from typing import Annotated

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse

from chatmem.web.ui.assets import static_url

#: At most this many domains of each kind make it into the policy.
MAX_DOMAINS = 32
#: The longest domain taken.
MAX_DOMAIN_LENGTH = 253

_LABEL = r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?"
_HOST = rf"(?:\*\.)?{_LABEL}(?:\.{_LABEL})*(?::[0-9]{{1,5}})?"
_ORIGIN = re.compile(rf"(?P<scheme>https|wss)://{_HOST}/?")
_BARE_HOST = re.compile(_HOST)

router = APIRouter(include_in_schema=False)


def csp_source(value: str, *, websocket: bool = False) -> str | None:
    """``value`` as a CSP source expression, or ``None`` when it is not an ``https`` origin
    (``wss`` too when ``websocket``) or a host name: ``"cdn.example.com"`` gives
    ``"https://cdn.example.com"``, ``"https://*.example.com/"`` gives
    ``"https://*.example.com"``; ``"http://x.example"``, ``"https://x.example/path"``,
    ``"*.com"`` and ``"x.example; script-src *"`` give ``None``."""
    text = value.strip().lower()
    if not text or len(text) > MAX_DOMAIN_LENGTH:
        return None
    if "*." in text and "." not in text.split("*.", 1)[1].split(":", 1)[0]:
        return None  # "*.com": a whole top-level domain is no app's domain
    origin = _ORIGIN.fullmatch(text)
    if origin:
        if origin["scheme"] == "wss" and not websocket:
            return None
        return text.rstrip("/")
    if _BARE_HOST.fullmatch(text):
        return "https://" + text
    return None


def _sources(values: Sequence[str], *, websocket: bool = False) -> list[str]:
    kept: list[str] = []
    for value in values:
        source = csp_source(value, websocket=websocket)
        if source and source not in kept:
            kept.append(source)
        if len(kept) == MAX_DOMAINS:
            break
    return kept


def _listed(*words: str) -> str:
    return " ".join(words) if words else "'none'"


def sandbox_policy(
    proxy_script: str,
    *,
    connect: Sequence[str] = (),
    resource: Sequence[str] = (),
    frame: Sequence[str] = (),
    base: Sequence[str] = (),
) -> str:
    """The outer frame's Content-Security-Policy, which its ``srcdoc`` app inherits.
    ``proxy_script`` is the proxy script's absolute URL without its query (a source matched
    by path: no other script of chatmem's)."""
    loads = _sources(resource)
    inline = "'unsafe-inline'"
    return "; ".join(
        [
            "default-src 'none'",
            f"script-src {_listed(proxy_script, inline, *loads)}",
            f"style-src {_listed(inline, *loads)}",
            f"img-src {_listed('data:', 'blob:', *loads)}",
            f"font-src {_listed('data:', *loads)}",
            f"media-src {_listed('data:', 'blob:', *loads)}",
            f"connect-src {_listed(*_sources(connect, websocket=True))}",
            f"frame-src {_listed(*_sources(frame))}",
            f"base-uri {_listed(*_sources(base))}",
            "form-action 'none'",
            "object-src 'none'",
            "frame-ancestors 'self'",
            "sandbox allow-scripts",
        ]
    )


_PAGE = """<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><title>App</title></head>
<body><script src="{script}"></script></body>
</html>
"""

_Domains = Annotated[list[str] | None, Query(max_length=MAX_DOMAIN_LENGTH)]


@router.get("/apps/sandbox", response_class=HTMLResponse)
def sandbox(
    request: Request,
    connect: _Domains = None,
    resource: _Domains = None,
    frame: _Domains = None,
    base: _Domains = None,
) -> HTMLResponse:
    """The outer frame of an app (the module's docstring): no session needed, framed by
    chatmem's own pages only."""
    root = request.scope.get("root_path", "")
    script = root + static_url("apps_sandbox.js")
    origin = f"{request.url.scheme}://{request.url.netloc}"
    policy = sandbox_policy(
        origin + script.split("?", 1)[0],
        connect=connect or (),
        resource=resource or (),
        frame=frame or (),
        base=base or (),
    )
    return HTMLResponse(
        _PAGE.format(script=html.escape(script)),
        headers={
            "Content-Security-Policy": policy,
            # For browsers without frame-ancestors; the others follow the policy.
            "X-Frame-Options": "SAMEORIGIN",
            "Referrer-Policy": "no-referrer",
            "Cache-Control": "no-cache",
        },
    )
