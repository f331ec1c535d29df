"""``chatmem context plan``: the engine from the command line, offline (CONTRACT).

Reads one conversation of a ``chatmem.export/1`` file, plans its next request and prints the
plan JSON.  No server, database or network is used; a malformed or foreign file raises
``PlanInputError``, which ``chatmem.cli.main`` turns into one line on stderr and exit 1.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any, cast

import typer

from chatmem.context import MODES, Mode, PlanInputError, plan
from chatmem.context.document import load_export


def _read_json(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise PlanInputError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise PlanInputError(f"{path}: cannot read it ({exc})") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise PlanInputError(f"{path}: not valid JSON ({exc})") from None


def run_plan(
    file: Path,
    mode: str | None = None,
    window: int | None = None,
    draft: str | None = None,
    conversation: str | None = None,
) -> dict[str, Any]:
    """The plan JSON for one conversation of an export file."""
    items = load_export(_read_json(file))
    if conversation is not None:
        items = [item for item in items if item.id == conversation]
        if not items:
            raise PlanInputError(f"{file}: no conversation with id {conversation!r}")
    if not items:
        raise PlanInputError(f"{file}: the file holds no conversation")
    if len(items) > 1:
        ids = ", ".join(item.id or "?" for item in items[:10])
        raise PlanInputError(
            f"{file} holds {len(items)} conversations; choose one with --conversation ID ({ids})"
        )
    item = items[0]
    if mode is not None and mode not in MODES:
        raise PlanInputError(f"unknown mode {mode!r}; choose one of {', '.join(MODES)}")
    profile = item.profile
    if window is not None:
        if window < 1:
            raise PlanInputError("--window must be a positive number of tokens")
        profile = replace(profile, context_window=window)
    result = plan(
        item.conversation,
        profile,
        mode=cast(Mode, mode) if mode is not None else item.mode,
        draft=draft,
    )
    return result.to_dict()


def register(app: typer.Typer) -> None:
    context_app = typer.Typer(
        help="Inspect what the context engine would send.", no_args_is_help=True
    )
    app.add_typer(context_app, name="context")

    @context_app.command("plan")
    def plan_command(
        file: Path = typer.Argument(..., help="An export file (chatmem.export/1)."),
        mode: str | None = typer.Option(
            None, "--mode", help="off, economy, full or window (default: the conversation's)."
        ),
        window: int | None = typer.Option(
            None, "--window", help="The model's context window in tokens (default: the file's)."
        ),
        draft: str | None = typer.Option(
            None, "--draft", help="The message being typed (counted as the newest user message)."
        ),
        conversation: str | None = typer.Option(
            None, "--conversation", help="Which conversation, when the file holds several."
        ),
    ) -> None:
        """Print the plan of the next request as JSON."""
        typer.echo(
            json.dumps(
                run_plan(file, mode=mode, window=window, draft=draft, conversation=conversation),
                ensure_ascii=False,
                indent=2,
            )
        )
