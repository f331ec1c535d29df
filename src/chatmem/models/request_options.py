"""The request options a model call carries besides its messages and tools (issue 29).

Theory of operation
-------------------
An OpenAI client's ``temperature``, ``max_tokens``, ``response_format``, ``tool_choice`` …
change the answer, so none is dropped: each one chatmem knows is checked here — its type and
range as OpenAI documents them (:data:`RULES`) — and passed to the provider exactly as given.
One the provider cannot be asked for through chatmem is refused (:data:`REFUSED`), never
ignored: ``n`` above 1 (one answer per turn), ``logprobs`` (the answer reaches the client as
the run's text events, which carry no token probabilities), audio, predicted outputs,
OpenAI's hosted web search, the legacy ``functions``.

A model profile may hold ``request_defaults`` (used when the client sent none) and
``request_pins`` (used whatever the client sent), checked by the same rules
(:func:`checked_profile_options`).  :func:`effective_options` merges the three; what travels
is the result, on every request of every turn of the profile (the UI's too).  Parameters that
only mean something together are one parameter when merging (:data:`GROUPS`): a pinned
``max_tokens`` also replaces a client's ``max_completion_tokens``.

:func:`for_request` is the last step, per model request: ``tool_choice`` and
``parallel_tool_calls`` go only with a request that offers tools (without tools "auto" and
"none" are what happens anyway, and providers refuse ``tool_choice`` without ``tools``).
:func:`answer_limit` is the answer's size the client asked for: the plan reserves at least
that much of the window for the answer (``chatmem.turns.inputs``).

Pure: values in, values out; errors are :class:`~chatmem.errors.InvalidInput` naming the
parameter.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from typing import Any

from chatmem.errors import InvalidInput

#: OpenAI's rule for function and schema names.
NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
REASONING_EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh")
TOOL_CHOICES = ("auto", "none", "required")
#: A ``json_schema`` at most this many characters as JSON (a schema, not a document).
MAX_SCHEMA_CHARS = 100_000
MAX_STOP = 4
MAX_STOP_CHARS = 1_000
MAX_LOGIT_BIAS = 300
#: ``seed`` is a 64-bit integer at OpenAI.
SEED_RANGE = (-(2**63), 2**63 - 1)

#: Refused parameters and why (the 400's message); a field absent, null or ``False`` (for
#: ``logprobs``) passes.
REFUSED: Mapping[str, str] = {
    "logprobs": "chatmem does not return token log probabilities (the answer reaches you as "
    "the turn's text, which carries none); leave logprobs out",
    "top_logprobs": "chatmem does not return token log probabilities; leave top_logprobs out",
    "audio": "chatmem answers with text only; audio output is not supported",
    "prediction": "predicted outputs are not supported (chatmem sends its own plan of the "
    "conversation, which the prediction would not match)",
    "web_search_options": "OpenAI's hosted web search is not available through chatmem; "
    "offer a tool instead",
    "functions": "the legacy functions field is not supported; send tools instead",
    "function_call": "the legacy function_call field is not supported; send tool_choice instead",
}

#: Parameters that are one when defaults and pins are merged.
GROUPS: tuple[tuple[str, ...], ...] = (("max_tokens", "max_completion_tokens"),)
#: Only with a request that offers tools.
TOOL_OPTIONS = ("tool_choice", "parallel_tool_calls")


def _fail(name: str, rule: str) -> InvalidInput:
    return InvalidInput(f"{name}: {rule}", param=name)


def _number(low: float, high: float) -> Callable[[str, Any], Any]:
    def check(name: str, value: Any) -> Any:
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or not math.isfinite(value)
            or not low <= value <= high
        ):
            raise _fail(name, f"must be a number from {low:g} to {high:g}")
        return value

    return check


def _whole(low: int, high: int) -> Callable[[str, Any], Any]:
    def check(name: str, value: Any) -> Any:
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise _fail(name, f"must be a whole number from {low:,} to {high:,}")
        return value

    return check


def _bool(name: str, value: Any) -> Any:
    if not isinstance(value, bool):
        raise _fail(name, "must be true or false")
    return value


def _stop(name: str, value: Any) -> Any:
    items = [value] if isinstance(value, str) else value
    if (
        not isinstance(items, list)
        or not 1 <= len(items) <= MAX_STOP
        or not all(isinstance(s, str) and 0 < len(s) <= MAX_STOP_CHARS for s in items)
    ):
        raise _fail(name, f"a string or a list of 1 to {MAX_STOP} non-empty strings")
    return value


def _response_format(name: str, value: Any) -> Any:
    kind = value.get("type") if isinstance(value, dict) else None
    if kind in ("text", "json_object"):
        return value
    if kind != "json_schema":
        raise _fail(name, 'type must be "text", "json_object" or "json_schema"')
    spec = value.get("json_schema")
    if not isinstance(spec, dict) or not isinstance(spec.get("name"), str):
        raise _fail(name, "json_schema needs an object with a name")
    if not NAME.match(spec["name"]):
        raise _fail(name, "json_schema.name: letters, digits, _ and -, at most 64")
    schema = spec.get("schema")
    if schema is not None and not isinstance(schema, dict):
        raise _fail(name, "json_schema.schema must be a JSON Schema object")
    if spec.get("strict") is not None and not isinstance(spec["strict"], bool):
        raise _fail(name, "json_schema.strict must be true or false")
    if len(repr(schema)) > MAX_SCHEMA_CHARS:
        raise _fail(name, f"json_schema.schema: at most {MAX_SCHEMA_CHARS:,} characters")
    return value


def _tool_choice(name: str, value: Any) -> Any:
    if isinstance(value, str):
        if value not in TOOL_CHOICES:
            raise _fail(name, 'one of "auto", "none", "required" or a named function')
        return value
    function = value.get("function") if isinstance(value, dict) else None
    if (
        not isinstance(value, dict)
        or value.get("type") != "function"
        or not isinstance(function, dict)
        or not isinstance(function.get("name"), str)
        or not NAME.match(function["name"])
    ):
        raise _fail(name, 'a named function is {"type": "function", "function": {"name": …}}')
    return value


def _reasoning_effort(name: str, value: Any) -> Any:
    if value not in REASONING_EFFORTS:
        raise _fail(name, f"one of {', '.join(REASONING_EFFORTS)}")
    return value


def _bias(token: Any, bias: Any) -> bool:
    return (
        isinstance(token, str)
        and token.isdigit()
        and not isinstance(bias, bool)
        and isinstance(bias, (int, float))
        and -100 <= bias <= 100
    )


def _logit_bias(name: str, value: Any) -> Any:
    if not (
        isinstance(value, dict)
        and len(value) <= MAX_LOGIT_BIAS
        and all(_bias(token, bias) for token, bias in value.items())
    ):
        raise _fail(name, "a map of token ids to numbers from -100 to 100")
    return value


#: The parameters passed to the provider, each with its check (OpenAI's documented types and
#: ranges).
RULES: Mapping[str, Callable[[str, Any], Any]] = {
    "temperature": _number(0, 2),
    "top_p": _number(0, 1),
    "max_tokens": _whole(1, 10_000_000),
    "max_completion_tokens": _whole(1, 10_000_000),
    "stop": _stop,
    "seed": _whole(*SEED_RANGE),
    "presence_penalty": _number(-2, 2),
    "frequency_penalty": _number(-2, 2),
    "response_format": _response_format,
    "tool_choice": _tool_choice,
    "parallel_tool_calls": _bool,
    "reasoning_effort": _reasoning_effort,
    "logit_bias": _logit_bias,
    "logprobs": _bool,  # ``true`` is refused (:data:`REFUSED`)
}


def refusal(name: str, value: Any) -> str | None:
    """Why ``name: value`` cannot be honoured (None: it can, or it was not really sent)."""
    if value is None or value is False or name not in REFUSED:
        return None
    return REFUSED[name]


def checked_request_options(fields: Mapping[str, Any]) -> dict[str, Any]:
    """The options of a client's request (``fields``: its body's top-level fields), checked:
    the ones in :data:`RULES` that were sent (null is "not sent"), as given.  A refused one
    (:data:`REFUSED`, ``modalities`` with anything but text) raises ``InvalidInput``."""
    for name in REFUSED:
        why = refusal(name, fields.get(name))
        if why is not None:
            raise _fail(name, why)
    modalities = fields.get("modalities")
    if modalities is not None and modalities != ["text"]:
        raise _fail("modalities", 'chatmem answers with text only: send ["text"] or leave it out')
    return {name: RULES[name](name, fields[name]) for name in RULES if fields.get(name) is not None}


def checked_profile_options(name: str, value: Any) -> dict[str, Any] | None:
    """A profile's ``request_defaults`` or ``request_pins`` (``name``), checked by the same
    rules; None or ``{}`` is none.  Unknown parameters are refused (a profile's setting that
    would be ignored is a mistake to say), so is a named ``tool_choice`` (it would name a tool
    of no particular request)."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise InvalidInput(f"{name}: an object of request parameters", param=name)
    unknown = sorted(set(value) - set(RULES))
    if unknown:
        raise InvalidInput(
            f"{name}: unknown parameters {', '.join(unknown)} (known: {', '.join(RULES)})",
            param=name,
        )
    out: dict[str, Any] = {}
    for key, item in value.items():
        if item is None:
            continue
        why = refusal(key, item)
        if why is not None:
            raise InvalidInput(f"{name}.{key}: {why}", param=name)
        try:
            out[key] = RULES[key](key, item)
        except InvalidInput as exc:
            raise InvalidInput(f"{name}.{exc.message}", param=name) from None
    if isinstance(out.get("tool_choice"), dict):
        raise InvalidInput(
            f'{name}.tool_choice: "auto", "none" or "required" (a named function belongs to '
            "a request)",
            param=name,
        )
    return out or None


def _group(name: str) -> tuple[str, ...]:
    return next((g for g in GROUPS if name in g), (name,))


def effective_options(
    defaults: Mapping[str, Any] | None,
    client: Mapping[str, Any] | None,
    pins: Mapping[str, Any] | None,
) -> dict[str, Any]:
    """What a request carries: the client's options, the profile's ``defaults`` for the
    parameters the client did not send, the profile's ``pins`` over both (a parameter and its
    :data:`GROUPS` siblings count as one)."""
    out = dict(client or {})
    for name, value in (defaults or {}).items():
        if not any(g in out for g in _group(name)):
            out[name] = value
    for name, value in (pins or {}).items():
        for sibling in _group(name):
            out.pop(sibling, None)
        out[name] = value
    return out


def for_request(options: Mapping[str, Any], *, offers_tools: bool) -> dict[str, Any]:
    """The options of one model request (:data:`TOOL_OPTIONS` only when it offers tools)."""
    if offers_tools:
        return dict(options)
    return {k: v for k, v in options.items() if k not in TOOL_OPTIONS}


def answer_limit(options: Mapping[str, Any]) -> int | None:
    """The answer's size in tokens the options ask for (the larger of ``max_tokens`` and
    ``max_completion_tokens``), or None."""
    sizes = [v for k in GROUPS[0] if isinstance(v := options.get(k), int)]
    return max(sizes) if sizes else None


def forced_tool(options: Mapping[str, Any]) -> str | None:
    """The function a ``tool_choice`` names, if it names one."""
    choice = options.get("tool_choice")
    if isinstance(choice, dict):
        return str(choice["function"]["name"])
    return None
