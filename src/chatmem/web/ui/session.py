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
from chatmem.store.tables.accounts import User


@dataclass(frozen=True)
class Viewer:
    name: str
    is_admin: bool = False


def viewer_of(request: Request) -> Viewer | None:
    """The signed-in user of this browser request, or ``None``."""
    token = request.cookies.get(SESSION_COOKIE)
    if not token:
        return None
    with request.app.state.db.session() as session:
        browser = accounts.browser_session_for(session, token)
        if browser is None:
            return None
        user = session.get(User, browser.user_id)
        if user is None:
            return None
        return Viewer(name=user.name, is_admin=bool(user.is_admin))
