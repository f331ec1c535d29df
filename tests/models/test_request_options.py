"""Issue 29: the request options — checked by OpenAI's documented rules, merged with a
profile's defaults and pins, trimmed per request (pure)."""

from __future__ import annotations

from typing import Any

import pytest

from chatmem.errors import InvalidInput
from chatmem.models.request_options import (
    REFUSED,
    RULES,
    answer_limit,
    checked_profile_options,
    checked_request_options,
    effective_options,
    for_request,
    forced_tool,
)

GOOD: dict[str, Any] = {
    "temperature": 0,
    "top_p": 1,
    "max_tokens": 1,
    "max_completion_tokens": 4096,
    "stop": "END",
    "seed": -3,
    "presence_penalty": -2,
    "frequency_penalty": 2.0,
    "response_format": {
        "type": "json_schema",
        "json_schema": {"name": "Answer_1", "schema": {"type": "object"}, "strict": True},
    },
    "tool_choice": {"type": "function", "function": {"name": "get-weather"}},
    "parallel_tool_calls": True,
    "reasoning_effort": "minimal",
    "logit_bias": {"50256": -100, "11": 2.5},
    "logprobs": False,
}


def test_every_rule_has_a_good_example() -> None:
    assert set(GOOD) == set(RULES)


def test_good_values_pass_as_given() -> None:
    assert checked_request_options({**GOOD, "model": "x", "messages": []}) == GOOD


def test_null_is_not_sent() -> None:
    assert checked_request_options({"temperature": None, "stop": None, "audio": None}) == {}


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("temperature", 2.01),
        ("temperature", True),
        ("temperature", float("nan")),
        ("top_p", 1.5),
        ("max_tokens", 0),
        ("max_tokens", 1.5),
        ("max_completion_tokens", "100"),
        ("stop", []),
        ("stop", ["a", ""]),
        ("stop", ["a", "b", "c", "d", "e"]),
        ("stop", 3),
        ("seed", 2**63),
        ("presence_penalty", -2.5),
        ("frequency_penalty", "0"),
        ("response_format", "json_object"),
        ("response_format", {"type": "yaml"}),
        ("response_format", {"type": "json_schema", "json_schema": {}}),
        ("response_format", {"type": "json_schema", "json_schema": {"name": "a b"}}),
        ("response_format", {"type": "json_schema", "json_schema": {"name": "a", "schema": 1}}),
        (
            "response_format",
            {"type": "json_schema", "json_schema": {"name": "a", "strict": "yes"}},
        ),
        ("tool_choice", "any"),
        ("tool_choice", {"type": "function"}),
        ("tool_choice", {"type": "function", "function": {"name": "has space"}}),
        ("parallel_tool_calls", 1),
        ("reasoning_effort", "max"),
        ("logit_bias", {"abc": 1}),
        ("logit_bias", {"1": 101}),
        ("logit_bias", []),
        ("logprobs", "no"),
    ],
)
def test_bad_values_are_refused_naming_the_parameter(name: str, value: Any) -> None:
    with pytest.raises(InvalidInput) as caught:
        checked_request_options({name: value})
    assert caught.value.message.startswith(name + ":")
    assert caught.value.data["param"] == name


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_what_cannot_be_honoured_is_refused(name: str) -> None:
    value: Any = True if name == "logprobs" else {"x": 1}
    with pytest.raises(InvalidInput) as caught:
        checked_request_options({name: value})
    assert caught.value.data["param"] == name


def test_logprobs_false_and_text_modalities_pass() -> None:
    assert checked_request_options({"logprobs": False, "modalities": ["text"]}) == {
        "logprobs": False
    }
    with pytest.raises(InvalidInput):
        checked_request_options({"modalities": ["text", "audio"]})


def test_profile_options_use_the_same_rules() -> None:
    assert checked_profile_options("request_pins", None) is None
    assert checked_profile_options("request_pins", {}) is None
    assert checked_profile_options("request_pins", {"seed": 1, "stop": None}) == {"seed": 1}
    for bad in ({"temperature": 3}, {"n": 2}, {"logprobs": True}, "x"):
        with pytest.raises(InvalidInput) as caught:
            checked_profile_options("request_pins", bad)
        assert caught.value.message.startswith("request_pins")
    with pytest.raises(InvalidInput, match="named function belongs to a request"):
        checked_profile_options("request_defaults", {"tool_choice": GOOD["tool_choice"]})
    assert checked_profile_options("request_defaults", {"tool_choice": "required"}) == {
        "tool_choice": "required"
    }


def test_the_client_beats_a_default_and_a_pin_beats_the_client() -> None:
    merged = effective_options(
        {"temperature": 0.2, "seed": 7},
        {"temperature": 0.9, "top_p": 0.5},
        {"top_p": 1.0},
    )
    assert merged == {"temperature": 0.9, "top_p": 1.0, "seed": 7}
    assert effective_options(None, None, None) == {}


def test_max_tokens_and_max_completion_tokens_are_one_parameter() -> None:
    # A default of either does not join a client's other; a pin of either replaces both.
    assert effective_options({"max_tokens": 100}, {"max_completion_tokens": 50}, None) == {
        "max_completion_tokens": 50
    }
    assert effective_options(None, {"max_completion_tokens": 50}, {"max_tokens": 10}) == {
        "max_tokens": 10
    }
    assert answer_limit({"max_tokens": 10, "max_completion_tokens": 30}) == 30
    assert answer_limit({"temperature": 1}) is None


def test_tool_options_go_only_with_tools() -> None:
    options = {"tool_choice": "none", "parallel_tool_calls": False, "seed": 1}
    assert for_request(options, offers_tools=True) == options
    assert for_request(options, offers_tools=False) == {"seed": 1}


def test_forced_tool() -> None:
    assert forced_tool({"tool_choice": GOOD["tool_choice"]}) == "get-weather"
    assert forced_tool({"tool_choice": "required"}) is None
