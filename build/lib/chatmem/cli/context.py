"""``chatmem context plan``: the engine from the command line, offline (CONTRACT).

Reads one conversation of a ``chatmem.export/1`` file, plans its next request and prints the
plan JSON.  With ``--compact`` it first folds the memory as a turn would (CTX-21), driving the
engine's fold (:func:`chatmem.context.folding.fold`) with a stub summariser that keeps the
first words of each round, and prints the plan after the fold with a ``fold`` section: every
round, what it covered and what it sent.  No server, database or network is used; a malformed
or foreign file raises ``PlanInputError``, which ``chatmem.cli.main`` turns into one line on
stderr and exit 1.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import typer

from chatmem.context import MODES, PlanInputError, count_message, get_tokenizer, plan
from chatmem.context.compaction import SummaryRound
from chatmem.context.document import load_export
from chatmem.context.folding import fold, run_fold
from chatmem.context.history import CountedMessages
from chatmem.context.values import default_answer_reserve


def stub_summary(request: SummaryRound) -> str:
    """An offline stand-in for the summariser: the first words of the round's prompt, within
    half the summary's cap (so the simulation's sizes are those of a real fold)."""
    words = request.prompt[-1]["content"].split()
    return " ".join(words[: max(1, request.max_output_tokens // 2)])


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
    compact: bool = False,
) -> dict[str, Any]:
    """The plan JSON for one conversation of an export file (``compact``: after the fold a
    turn would make, simulated with :func:`stub_summary`)."""
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
        automatic = profile.answer_reserve == default_answer_reserve(profile.context_window)
        profile = replace(
            profile,
            context_window=window,
            answer_reserve=default_answer_reserve(window) if automatic else profile.answer_reserve,
        )
    chosen = mode if mode is not None else item.mode
    tokenizer = get_tokenizer(profile.tokenizer)
    # Each message is counted once (the plan and every round read the sums).
    conversation_value = replace(
        item.conversation,
        messages=CountedMessages(item.conversation.messages, lambda m: count_message(m, tokenizer)),
    )
    hidden = dict.fromkeys(item.hidden, "hidden")  # PROJ-3: kept, never sent
    if not compact:
        planned = plan(conversation_value, profile, mode=chosen, draft=draft).to_dict()
        planned["status"].update(hidden)
        return planned
    rounds: list[dict[str, Any]] = []

    def summarise(request: SummaryRound) -> str:
        text = stub_summary(request)
        rounds.append(
            {
                "round": request.number,
                "piece": list(request.piece) if request.piece else None,
                "first": request.first_id,
                "through": request.through,
                "messages": request.message_count,
                "covered": request.covered,
                "stored": request.commit,
                "input_tokens": request.input_tokens,
                "max_output_tokens": request.max_output_tokens,
                "estimated_cost": request.estimated_cost,
            }
        )
        return text

    result = run_fold(
        fold(conversation_value, profile, mode=chosen, draft=draft, tokenizer=tokenizer),
        summarise,
    )
    out = result.plan.to_dict()
    out["status"].update(hidden)
    out["fold"] = {
        "rounds": rounds,
        "folded": result.folded,
        "summary": (
            {"text": result.summary.text, "through": result.summary.through}
            if result.summary is not None
            else None
        ),
    }
    return out


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
        compact: bool = typer.Option(
            False,
            "--compact",
            help="Fold the memory first as a turn would (a stub summariser, offline), then "
            "plan; the output gains a 'fold' section with every round.",
        ),
    ) -> None:
        """Print the plan of the next request as JSON."""
        typer.echo(
            json.dumps(
                run_plan(
                    file,
                    mode=mode,
                    window=window,
                    draft=draft,
                    conversation=conversation,
                    compact=compact,
                ),
                ensure_ascii=False,
                indent=2,
            )
        )
