"""Reading export documents (CONTRACT "Export format") into engine values."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from chatmem.context import PlanInputError, Profile
from chatmem.context.document import conversation_from_export, load_export

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "conversation.json"


def example() -> dict[str, Any]:
    return json.loads(EXAMPLE.read_text(encoding="utf-8"))


def test_the_example_loads_with_its_profile_mode_and_tool_calls() -> None:
    [item] = load_export(example())
    assert item.id == "c1" and item.title == "Trip to Canberra" and item.mode == "full"
    assert item.profile == Profile(context_window=32768, answer_reserve=4096)
    calls = [m for m in item.conversation.messages if m.tool_calls]
    assert calls[0].tool_calls[0].name == "get_weather"
    tool = next(m for m in item.conversation.messages if m.role == "tool")
    assert tool.tool_call_id == "call_1"
    assert item.conversation.files[0].message_id == "m9"


def test_optional_parts_take_defaults() -> None:
    conversation, profile, mode = conversation_from_export(
        {"messages": [{"id": "m1", "role": "user", "content": None}]}
    )
    assert profile == Profile() and mode == "full"
    assert conversation.messages[0].content == ""
    assert conversation.summary is None and conversation.files == ()


def test_flat_tool_calls_prices_and_knobs_are_accepted() -> None:
    conversation, profile, _ = conversation_from_export(
        {
            "mode": "window",
            "instructions": "Be brief.",
            "tools": [{"type": "function"}],
            "profile": {
                "model": "gpt-4o",
                "prices": {"input_per_mtok": 1, "output_per_mtok": 2},
                "window_chars": 100,
                "stateless": None,
            },
            "summary": {"text": "S", "through": "m1", "focus": "money"},
            "messages": [
                {"id": "m1", "role": "assistant", "tool_calls": [{"id": "c", "name": "f"}]}
            ],
        }
    )
    assert conversation.messages[0].tool_calls[0].arguments == "{}"
    assert profile.prices is not None and profile.prices.output_per_mtok == 2.0
    assert profile.window_chars == 100 and profile.model == "gpt-4o"
    assert conversation.summary is not None and conversation.summary.focus == "money"
    assert conversation.instructions == "Be brief." and len(conversation.tools) == 1


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        (("format",), "other/1", "not a chatmem export"),
        (("conversations",), {}, "conversations: expected a list"),
        (("conversations", 0), [], "conversations[0]: expected an object"),
        (("conversations", 0, "mode"), "all", "conversations[0].mode"),
        (("conversations", 0, "title"), 3, "conversations[0].title"),
        (("conversations", 0, "messages", 0, "role"), "robot", "messages[0].role"),
        (("conversations", 0, "messages", 0, "content"), 5, "messages[0].content"),
        (("conversations", 0, "messages", 0, "id"), None, "messages[0].id: missing"),
        (("conversations", 0, "messages", 1, "id"), "m1", "duplicate message id"),
        (("conversations", 0, "messages", 0, "excluded"), "yes", "excluded"),
        (("conversations", 0, "messages", 0, "tool_calls"), "x", "tool_calls: expected a list"),
        (
            ("conversations", 0, "messages", 0, "tool_calls"),
            [{"id": "c", "name": "f", "arguments": {}}],
            "arguments",
        ),
        (("conversations", 0, "summary"), {"text": "s", "through": "zz"}, "no message"),
        (("conversations", 0, "files", 0, "state"), "lost", "files[0].state"),
        (("conversations", 0, "files", 0, "message_id"), "zz", "files[0].message_id"),
        (("conversations", 0, "profile", "tokenizer"), "gpt2", "profile.tokenizer"),
        (("conversations", 0, "profile", "context_window"), -1, "context_window"),
        (("conversations", 0, "profile", "context_window"), True, "context_window"),
        (("conversations", 0, "profile", "prices"), {"input_per_mtok": "x"}, "prices"),
    ],
)
def test_malformed_documents_say_what_and_where(
    path: tuple[Any, ...], value: Any, message: str
) -> None:
    doc = copy.deepcopy(example())
    target: Any = doc
    for key in path[:-1]:
        target = target[key]
    if value is None:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    with pytest.raises(PlanInputError, match=message.replace("[", r"\[").replace("]", r"\]")):
        load_export(doc)


def test_a_foreign_document_is_refused() -> None:
    with pytest.raises(PlanInputError):
        load_export([1, 2])
    with pytest.raises(PlanInputError):
        conversation_from_export("text")  # type: ignore[arg-type]
