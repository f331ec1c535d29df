"""The browser UI: server-rendered pages, static assets, nothing that needs Node.

The pages are Jinja2 templates (``templates/``) that lay out every screen with its fixed
wording; small per-feature vanilla JS files (``static/*.js``) fill them from the JSON API
under ``/api/v1`` — the UI is a client of exactly the public API, so anything the browser can
do a script can do too.  :func:`install_ui` is the one call ``create_app`` makes.
"""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles

from chatmem.web.i18n import languages
from chatmem.web.ui.assets import STATIC_DIR
from chatmem.web.ui.routes import router
from chatmem.web.ui.sandbox import router as sandbox_router


def install_ui(app: FastAPI) -> None:
    """Add the HTML pages and mount the static assets at ``/static``."""
    languages()  # PROJ-4: the catalogs are read (and a broken one fails) at start
    app.include_router(router)
    app.include_router(sandbox_router)  # APPS-2: the outer frame of MCP Apps
    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")


__all__ = ["STATIC_DIR", "install_ui", "router"]
