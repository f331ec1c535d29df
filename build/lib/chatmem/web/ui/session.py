"""Who is looking at a page: the browser session cookie, resolved by the storage core.

Pages only need to know *whether* someone is signed in (and their name for the header);
everything else goes through the JSON API, which does its own authentication and CSRF check.
The cookie is resolved with the same store functions the API's ``CurrentUser`` uses, so there
is one notion of a valid session.  Page views are reads: no CSRF check is needed here.
"""

from __future__ import annotations

from dataclasses import dataclass

from fastapi import Request

from chatmem.auth.cookies import SESSION_COOKIE
from chatmem.store import accounts
from chatmem.web.i18n import Language, choose


@dataclass(frozen=True)
class Viewer:
    name: str
    is_admin: bool = False
    locale: str | None = None  # the interface language they chose (PROJ-4)
    theme: str | None = None  # "light" or "dark"; None: the system's


def viewer_of(request: Request) -> Viewer | None:
    """The signed-in user of this browser request, or ``None``."""
    token = request.cookies.get(SESSION_COOKIE)
    if not token:
        return None
    with request.app.state.db.session() as session:
        browser = accounts.browser_session_for(session, token)
        if browser is None:
            return None
        user = accounts.user_by_id(session, browser.user_id)
        if user is None:
            return None
        return Viewer(
            name=user.name, is_admin=bool(user.is_admin), locale=user.locale, theme=user.theme
        )


def page_language(request: Request, viewer: Viewer | None) -> Language:
    """The language this page is shown in (PROJ-4): the viewer's setting, else the
    browser's ``Accept-Language``; kept on the request so a page resolves it once."""
    language = getattr(request.state, "language", None)
    if not isinstance(language, Language):
        language = choose(viewer.locale if viewer else None, request.headers.get("accept-language"))
        request.state.language = language
    return language
