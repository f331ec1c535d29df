"""The app factory.  No import-time singletons: ``create_app(settings)`` builds everything.

Start-up order (in the lifespan): open the database and apply Alembic migrations, load the
encryption key, mark runs left ``running`` by a dead process as ``interrupted``, start the
run coordinator.  Tests build their own app with a temporary state directory.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from chatmem import __version__
from chatmem.settings import Settings
from chatmem.web.api import build_api_router
from chatmem.web.errors import install_error_handlers


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or Settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        yield

    app = FastAPI(
        title="chatmem",
        version=__version__,
        lifespan=lifespan,
        openapi_url="/openapi.json",
        docs_url="/api/docs",
        redoc_url=None,
    )
    app.state.settings = settings
    install_error_handlers(app)
    app.include_router(build_api_router())
    return app
