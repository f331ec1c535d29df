"""``chatmem context plan``: the engine from the command line (filled in by the engine work)."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    context_app = typer.Typer(help="Inspect what the context engine would send.", no_args_is_help=True)
    app.add_typer(context_app, name="context")
