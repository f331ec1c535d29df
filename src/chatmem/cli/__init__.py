"""The ``chatmem`` command.  One Typer app; each command group lives in its own module.

Errors are mapped in one place (:func:`main`): a ``ChatmemError`` or engine error becomes one
line on stderr and exit status 1; usage errors exit 2 (Typer/Click's own convention); no
traceback ever reaches the user.
"""

from __future__ import annotations

import importlib
import sys

import typer
from typer.exceptions import TyperException

from chatmem import __version__
from chatmem.context.errors import EngineError
from chatmem.errors import ChatmemError

app = typer.Typer(
    name="chatmem",
    help="chatmem: a self-hosted chat server with visible conversation memory.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

# Modules that register commands on ``app`` (each defines ``register(app)``).
COMMAND_MODULES = [
    "serve",
    "exchange",
    "context",
    "accounts",
    "keys",
    "backup",
]


def _register() -> None:
    for name in COMMAND_MODULES:
        importlib.import_module(f"chatmem.cli.{name}").register(app)


_register()


def _version(value: bool) -> None:
    if value:
        typer.echo(f"chatmem {__version__}")
        raise typer.Exit()


@app.callback()
def _options(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """chatmem: a self-hosted chat server with visible conversation memory."""


def fail(message: str, status: int = 1) -> None:
    """Print one clear line on stderr and exit."""
    typer.echo(f"Error: {message}", err=True)
    raise SystemExit(status)


def main(argv: list[str] | None = None) -> None:
    try:
        app(args=argv, standalone_mode=False)
    except typer.Abort:
        fail("aborted")
    except typer.Exit as exc:
        raise SystemExit(exc.exit_code) from None
    except TyperException as exc:  # usage errors: Typer's own message, exit status 2
        show = getattr(exc, "show", None)
        if callable(show):
            show()
        else:
            typer.echo(f"Error: {exc}", err=True)
        raise SystemExit(getattr(exc, "exit_code", 2)) from None
    except (ChatmemError, EngineError) as exc:
        fail(str(exc))
    except KeyboardInterrupt:
        fail("interrupted", 130)
    except SystemExit:
        raise
    except Exception as exc:  # never a traceback to a user
        fail(f"unexpected {type(exc).__name__}: {exc}")
    sys.exit(0)
