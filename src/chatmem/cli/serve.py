"""``chatmem serve``: run the web server with uvicorn."""

from __future__ import annotations

import typer

from chatmem.settings import Settings


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
        app_ = create_app(settings)
        uvicorn.run(
            app_,
            host=settings.host,
            port=settings.port,
            log_level=settings.log_level.lower(),
            # Each access-log line is built before the logger's level is checked.
            access_log=settings.log_level.upper() in ("DEBUG", "INFO"),
            proxy_headers=False,
        )
