"""Which of an OpenAI client's messages are new to the stored conversation (issue 17)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from chatmem.turns.history_match import CLIENT_TOOL, Said, client_view, match_history

SYS, U1, A1, U2 = (
    Said("system", "Be brief."),
    Said("user", "Hi"),
    Said("assistant", "Hello!"),
    Said("user", "Bye"),
)


@pytest.mark.parametrize(
    ("stored", "incoming", "new", "diverged"),
    [
        ((), (SYS, U1), (SYS, U1), False),  # nothing stored: all new
        ((SYS, U1, A1), (SYS, U1, A1, U2), (U2,), False),  # the whole history: the rest
        ((SYS, U1), (SYS, U1), (), False),  # the same again: answer its last message
        ((SYS, U1, A1), (U2,), (U2,), False),  # only the new message
        ((SYS, U1, A1), (SYS, U2), (U2,), False),  # the known system prompt is not repeated
        ((SYS, U1, A1), (Said("system", "Be long."), U2), (Said("system", "Be long."), U2), False),
        ((SYS, U1, A1), (SYS, Said("user", "Hey"), A1, U2), None, True),  # an edited message
        ((SYS, U1, A1, U2, A1), (SYS, U1, A1, U2), None, True),  # a dropped answer
    ],
)
def test_match(
    stored: tuple[Said, ...],
    incoming: tuple[Said, ...],
    new: tuple[Said, ...] | None,
    diverged: bool,
) -> None:
    match = match_history(stored, incoming)
    assert match.diverged is diverged
    assert match.new == (incoming if new is None else new)


def test_whitespace_around_an_answer_does_not_diverge() -> None:
    match = match_history((U1, A1), (U1, Said("assistant", " Hello!\n"), U2))
    assert match == match_history((U1, A1), (U1, A1, U2))


def test_a_tool_result_matches_by_its_call() -> None:
    result = Said("tool", "42", "call_1")
    assert match_history((U1, A1, result), (U1, A1, Said("tool", "42", "call_2"), U2)).diverged
    assert match_history((U1, A1, result), (U1, A1, result, U2)).new == (U2,)


def row(role: str, content: str, meta: dict[str, Any] | None = None, **kw: Any) -> Any:
    return SimpleNamespace(
        id=kw.get("id", f"{role}-{content}"),
        role=role,
        content=content,
        tool_call_id=kw.get("tool_call_id"),
        meta=meta,
    )


def test_client_view_joins_an_answers_steps_and_hides_server_tools() -> None:
    view = client_view(
        [
            row("user", "Weather?", id="u1"),
            row("assistant", "Let me check. "),
            row("tool", "sunny", {"run_id": "r", "tool": "weather"}, tool_call_id="c1"),
            row("assistant", "It is sunny."),
            row("user", "And tomorrow?", id="u2"),
            row("assistant", ""),
            row("tool", "rain", {CLIENT_TOOL: True}, tool_call_id="c2"),
            row("assistant", "Rain."),
        ]
    )
    assert view.messages == (
        Said("user", "Weather?"),
        Said("assistant", "Let me check. It is sunny."),
        Said("user", "And tomorrow?"),
        Said("assistant", ""),
        Said("tool", "rain", "c2"),
        Said("assistant", "Rain."),
    )
    assert view.last_user_id == "u2"


def test_a_failed_answer_is_not_part_of_the_view() -> None:
    view = client_view([row("user", "Hi", id="u1"), row("assistant", "Hel", {"failed": True})])
    assert view.messages == (Said("user", "Hi"),)
    assert match_history(view.messages, (Said("user", "Hi"),)).new == ()  # a retry
