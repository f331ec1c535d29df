"""``chatmem serve``: run the web server with uvicorn."""

from __future__ import annotations

import gc
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import typer

from chatmem import __version__
from chatmem.settings import Settings
from chatmem.telemetry.logs import configure_logging

log = logging.getLogger("chatmem")

Lifespan = Callable[[Any], AbstractAsyncContextManager[Any]]


def frozen_after_startup(lifespan: Lifespan) -> Lifespan:
    """``lifespan``, then everything alive once the server has started is moved out of the
    garbage collector's reach (``gc.freeze``) until it stops.

    What start-up loads lives as long as the process: the modules, the routes and models,
    SQLAlchemy's tables, the tokenizers (about 240,000 objects the collector tracks).  A full
    collection walks all of them; under load (100 streams) one came every few seconds and
    held the event loop for 105–170 ms, every stream waiting.  Without them: 11–84 ms."""

    @asynccontextmanager
    async def frozen(app: Any) -> AsyncIterator[Any]:
        async with lifespan(app) as state:
            gc.collect()
            gc.freeze()
            try:
                yield state
            finally:
                gc.unfreeze()

    return frozen


def register(app: typer.Typer) -> None:
    @app.command()
    def serve(
        host: str | None = typer.Option(None, help="Listen address (default CHATMEM_HOST)."),
        port: int | None = typer.Option(None, help="Listen port (default CHATMEM_PORT)."),
    ) -> None:
        """Start the chatmem server."""
        import uvicorn

        from chatmem.web.app import create_app

        overrides: dict[str, object] = {}
        if host is not None:
            overrides["host"] = host
        if port is not None:
            overrides["port"] = port
        settings = Settings(**overrides)  # type: ignore[arg-type]
        configure_logging(settings.log_level, settings.log_format)
        log.info(
            "chatmem %s serving on http://%s:%d, state in %s",
            __version__,
            settings.host,
            settings.port,
            settings.state_dir.resolve(),
        )
        app_ = create_app(settings)
        app_.router.lifespan_context = frozen_after_startup(app_.router.lifespan_context)
        uvicorn.run(
            app_,
            host=settings.host,
            port=settings.port,
            log_level=settings.log_level.lower(),
            log_config=None,  # configure_logging's handler, for uvicorn's lines too
            access_log=False,  # web.observe writes the access lines, with request ids
            # X-Forwarded-For/-Proto only from the reverse proxies named (OPS-4): uvicorn
            # then takes the client's address and the scheme from them; else from the socket.
            proxy_headers=bool(settings.trusted_proxies.strip()),
            forwarded_allow_ips=settings.trusted_proxies.strip() or None,
        )
