"""The app factory.  No import-time singletons: ``create_app(settings)`` builds everything.

Start-up order (in the lifespan): open the database and apply Alembic migrations, create the
first administrator or print its sign-in link while it has never signed in, load the
encryption key, mark runs left ``running`` by a dead process as ``interrupted``, start the
run coordinator.  Tests build their own app with a temporary state directory.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio.to_thread
from fastapi import FastAPI

from chatmem import __version__
from chatmem.auth.bootstrap import announce_first_start
from chatmem.auth.throttle import throttle_from_settings, trusted_proxies_from_settings
from chatmem.security.endpoints import EndpointPolicy
from chatmem.security.secret_box import check_env_key, load_key
from chatmem.settings import Settings
from chatmem.store.db import WORKER_THREADS
from chatmem.store.startup import open_database
from chatmem.telemetry.metrics import Metrics
from chatmem.web.api import install_api
from chatmem.web.body_limit import BodyLimitMiddleware
from chatmem.web.deps import CredentialCache
from chatmem.web.errors import install_error_handlers
from chatmem.web.json_bounds import JsonBoundsMiddleware
from chatmem.web.observe import RequestContextMiddleware
from chatmem.web.openai_compat.responses import install_responses
from chatmem.web.openai_compat.routes import install_openai_compat
from chatmem.web.security import SecurityHeadersMiddleware, install_api_docs
from chatmem.web.slashes import install_slash_redirects
from chatmem.web.token_use import TokenUse
from chatmem.web.ui import install_ui


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or Settings()
    # Refuse to build an app on a malformed CHATMEM_ENCRYPTION_KEY / allow-list (PROF-3, PROF-4).
    check_env_key(settings.encryption_key)
    endpoint_policy = EndpointPolicy.from_settings(settings)
    trusted_proxies = trusted_proxies_from_settings(settings)
    metrics = Metrics()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        db = open_database(settings)
        announce_first_start(db, settings)
        db.writers.waited = metrics.write_wait_seconds.observe
        app.state.db = db
        # Worker threads for sync routes and units of work, sized with the database's
        # session slots so a session that has begun always finds a thread to finish on.
        anyio.to_thread.current_default_thread_limiter().total_tokens = WORKER_THREADS
        # SEC-2: sign-in throttling, in Redis when configured (replicas share the counts).
        app.state.signin_throttle = throttle_from_settings(settings)
        try:
            app.state.secrets = load_key(settings.state_dir, settings.encryption_key)
            # Turns: recover runs of dead processes (TURN-3), start the coordinator.
            from chatmem.turns.service import TurnService

            turns = TurnService.from_settings(
                db, settings, secrets=app.state.secrets, policy=endpoint_policy, metrics=metrics
            )
            app.state.turns = turns
            await turns.start()
            token_use: TokenUse = app.state.token_use
            recorder = asyncio.create_task(token_use.run(db), name="chatmem-token-use")
            try:
                yield
            finally:
                recorder.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await recorder
                with contextlib.suppress(Exception):  # the last uses, best effort
                    await token_use.flush(db)
                await turns.close()
        finally:
            await app.state.signin_throttle.close()
            await db.aclose()
            db.dispose()

    app = FastAPI(
        title="chatmem",
        version=__version__,
        lifespan=lifespan,
        openapi_url="/openapi.json",
        docs_url=None,  # served by install_api_docs, from static/vendor (SEC-3)
        redoc_url=None,
    )
    app.state.settings = settings
    app.state.credentials = CredentialCache()
    app.state.token_use = TokenUse()
    app.state.endpoint_policy = endpoint_policy
    app.state.trusted_proxies = trusted_proxies
    app.state.metrics = metrics
    install_error_handlers(app)
    # Outermost last: the size cap counts the bytes before the JSON bounds read them (SEC-1).
    app.add_middleware(JsonBoundsMiddleware, settings=settings)
    app.add_middleware(BodyLimitMiddleware, settings=settings)
    install_api(app)
    install_openai_compat(app)
    install_responses(app)
    install_ui(app)
    install_api_docs(app, "/api/docs")
    install_slash_redirects(app)  # relative Location, never the client's Host (SEC-3)
    # Every request's id, access line and metrics (web.observe).
    app.add_middleware(RequestContextMiddleware, metrics=metrics)
    # Outermost: every response gets the hardening headers (SEC-3).
    app.add_middleware(SecurityHeadersMiddleware, secure=settings.secure_cookies)
    return app
