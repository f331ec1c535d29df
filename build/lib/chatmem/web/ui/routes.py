"""HTML pages of the browser UI.

Each page is a server-rendered shell carrying all of its fixed wording; the data (the
conversation list, messages, the memory plan …) is fetched by the page's JS from the JSON API
so the UI never has a private back door.  A visitor without a session gets the sign-in page:
``/`` renders it in place, deeper pages redirect to ``/?next=…`` so the link survives sign-in.

Signing in works without the page's script too: the form posts to ``POST /signin`` (its script
normally takes the post over and calls the JSON API), so a visitor who presses Enter before the
script has run never sends a password in a URL.  The one-time sign-in link is a page route as
well: a used or expired link shows a browser the sign-in page with a word on why.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import quote

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.templating import Jinja2Templates
from jinja2 import pass_context
from jinja2.runtime import Context

from chatmem import __version__
from chatmem.auth.cookies import set_session_cookies
from chatmem.auth.throttle import SigninThrottled
from chatmem.errors import NotFound, Unauthorized
from chatmem.store import accounts
from chatmem.web.api.routes.auth import sign_in
from chatmem.web.i18n import DEFAULT_LOCALE, LANGUAGE_NAMES, Language, languages
from chatmem.web.security import posted_from_this_site, safe_next_path
from chatmem.web.ui.assets import APP_BRIDGE, app_bridge_integrity, static_url
from chatmem.web.ui.session import Viewer, page_language, viewer_of

TEMPLATES_DIR = Path(__file__).resolve().parent.parent / "templates"

templates = Jinja2Templates(directory=str(TEMPLATES_DIR))
templates.env.globals["static"] = static_url
# APPS-1: the chat page names the bridge apps.js loads, with its integrity.
templates.env.globals["app_bridge"] = lambda: (static_url(APP_BRIDGE), app_bridge_integrity())
templates.env.globals["chatmem_version"] = __version__


def _language(context: Context) -> Language:
    """The page's language: set by :func:`_page`, else resolved from the request (a page
    rendered some other way still speaks its user's language)."""
    language = context.get("lang")
    if isinstance(language, Language):
        return language
    request = context.get("request")
    if isinstance(request, Request):
        return page_language(request, viewer_of(request))
    return languages()[DEFAULT_LOCALE]


@pass_context
def _gettext(context: Context, message: str) -> str:
    return _language(context).gettext(message)


@pass_context
def _ngettext(context: Context, singular: str, plural: str, n: int) -> str:
    return _language(context).ngettext(singular, plural, n)


@pass_context
def _pgettext(context: Context, message_context: str, message: str) -> str:
    return _language(context).pgettext(message_context, message)


@pass_context
def _number(context: Context, value: float) -> str:
    return _language(context).number(value)


@pass_context
def _compact(context: Context, value: float) -> str:
    return _language(context).compact(value)


# PROJ-4: {% trans %} and _() in templates look messages up in the page's language.
templates.env.add_extension("jinja2.ext.i18n")
templates.env.install_gettext_callables(  # type: ignore[attr-defined]  # added by the extension
    _gettext, _ngettext, newstyle=True, pgettext=_pgettext
)
templates.env.filters["number"] = _number
templates.env.filters["compact"] = _compact
templates.env.globals["language_names"] = LANGUAGE_NAMES

router = APIRouter(include_in_schema=False)


def _page(request: Request, template: str, viewer: Viewer | None, **context: Any) -> Response:
    lang = page_language(request, viewer)
    return templates.TemplateResponse(
        request,
        template,
        {"viewer": viewer, "page": template.removesuffix(".html"), "lang": lang, **context},
    )


def _sign_in(
    request: Request, next_path: str = "/", *, error: str = "", status_code: int = 200
) -> Response:
    """The sign-in page; ``error`` names the message it shows (``wrong``, ``throttled``,
    ``empty``, ``link``, ``disabled``: ``signin.html`` words each)."""
    response = _page(request, "signin.html", None, next_path=next_path, error=error)
    response.status_code = status_code
    return response


def _signed_in_page(request: Request, template: str, **context: Any) -> Response:
    viewer = viewer_of(request)
    if viewer is None:
        return RedirectResponse(f"/?next={quote(request.url.path)}", status_code=303)
    return _page(request, template, viewer, **context)


@router.get("/", response_class=HTMLResponse)
def home(request: Request, next: str = "/") -> Response:
    """The chat (signed in), else the sign-in page; after sign-in, on to ``next`` on this site."""
    viewer = viewer_of(request)
    # Only same-site paths are followed after sign-in (no open redirect, SEC-3).
    safe_next = safe_next_path(next)
    if viewer is None:
        return _sign_in(request, safe_next)
    if safe_next != "/":
        return RedirectResponse(safe_next, status_code=303)
    return _page(request, "chat.html", viewer, conversation_id="")


@router.get("/signin", response_class=HTMLResponse)
def signin(request: Request, next: str = "/") -> Response:
    """The sign-in page."""
    return _sign_in(request, safe_next_path(next))


@router.post("/signin", response_class=HTMLResponse)
async def signin_form(request: Request) -> Response:
    """The sign-in form posted by the browser itself (its script had not run): signed in, on
    to ``next``; else the page again with why.  Only a post from this site's own page."""
    form = await request.form()
    name, password, next_value = (
        value if isinstance(value := form.get(key), str) else ""
        for key in ("name", "password", "next")
    )
    next_path = safe_next_path(next_value)
    if not posted_from_this_site(request):
        return _sign_in(request, next_path, status_code=403)
    name = name.strip()
    if not name or not password:
        return _sign_in(request, next_path, error="empty", status_code=400)
    try:
        token, csrf, _user = await sign_in(request, name, password)
    except SigninThrottled as exc:
        response = _sign_in(request, next_path, error="throttled", status_code=429)
        response.headers["Retry-After"] = str(exc.retry_after)
        return response
    except Unauthorized:
        return _sign_in(request, next_path, error="wrong", status_code=401)
    response = RedirectResponse(next_path, status_code=303)
    set_session_cookies(response, token, csrf, secure=request.app.state.settings.secure_cookies)
    return response


@router.get("/auth/link/{token}")
def signin_link(request: Request, token: str) -> Response:
    """The one-time sign-in link (the first start prints one): a session, then the chat.  A
    used, expired or unknown link shows a browser the sign-in page saying so; any other
    client gets the API's error (404 ``not_found``, 401 for a disabled account)."""
    try:
        with request.app.state.db.session(write=True) as session:
            user = accounts.redeem_signin_link(session, token)
            session_token, csrf = accounts.open_browser_session(session, user)
    except (NotFound, Unauthorized) as exc:
        if "text/html" not in request.headers.get("accept", ""):
            raise
        if isinstance(exc, NotFound):
            return _sign_in(request, error="link", status_code=404)
        return _sign_in(request, error="disabled", status_code=401)
    response = RedirectResponse("/", status_code=303)
    secure = request.app.state.settings.secure_cookies
    set_session_cookies(response, session_token, csrf, secure=secure)
    return response


@router.get("/c/{conversation_id}", response_class=HTMLResponse)
def conversation(request: Request, conversation_id: str) -> Response:
    """The chat, opened on one conversation."""
    return _signed_in_page(request, "chat.html", conversation_id=conversation_id)


@router.get("/profiles", response_class=HTMLResponse)
def profiles(request: Request) -> Response:
    """The Models page: model profiles, MCP servers (administrators), API tokens."""
    return _signed_in_page(request, "profiles.html")


@router.get("/archive", response_class=HTMLResponse)
def archive(request: Request) -> Response:
    """The archived conversations, searchable by title."""
    return _signed_in_page(request, "archive.html", archive_id="")


@router.get("/archive/{archive_id}", response_class=HTMLResponse)
def archived_conversation(request: Request, archive_id: str) -> Response:
    """One archived conversation, read without changing it (ARCH-1)."""
    return _signed_in_page(request, "archive.html", archive_id=archive_id)


@router.get("/usage", response_class=HTMLResponse)
def usage(request: Request) -> Response:
    """USE-4: session and weekly bars with their reset times, spending per model and
    conversation, the fallback in force, the user's extension requests."""
    return _signed_in_page(request, "usage.html")


@router.get("/admin", response_class=HTMLResponse)
def admin(request: Request) -> Response:
    """USE-5: the admin console (the page says "Administrators only" to anyone else, 403)."""
    viewer = viewer_of(request)
    if viewer is None:
        return _signed_in_page(request, "admin.html")  # the sign-in redirect
    response = _page(request, "admin.html", viewer)
    if not viewer.is_admin:
        response.status_code = 403
    return response
