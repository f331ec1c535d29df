"""How a model server says no (PROV-1, PROV-2, CTX-19): its refusals and errors, read.

Each rule reads an HTTP answer (or an error object in a stream) and says what it means
(:func:`status_error` applies them to an answer past 2xx); the client
(:mod:`chatmem.models.client`) acts on it:

* a 3xx is ``EndpointNotAllowed`` (redirects are never followed); 401/403
  ``ProviderAuthError``; 429 ``ProviderRateLimited``;
* a 400/422 naming ``stream_options`` (:func:`refused_stream_options`): the server takes no
  such field — :class:`WithoutStreamOptions`, sent again at once without it;
* a 400/422 saying a tool call id "must be" something (Mistral, :func:`wants_short_ids`):
  :class:`WithShortToolCallIds`, sent again with :func:`short_tool_call_ids`;
* a request offering tools refused in the server's words (Ollama, vLLM, llama.cpp,
  OpenAI: :func:`refuses_tools`): ``ProviderRefusesTools``, never retried;
* a context-length error in any of the common wordings or codes (:func:`is_context_length`):
  ``ProviderContextLength`` carrying the prompt size and window the provider named
  (:func:`context_error`, :func:`requested_tokens`);
* :data:`RETRY_STATUSES` are retried before the first token (:class:`Retryable`, with the
  server's ``Retry-After``), OpenAI's 429 ``insufficient_quota`` excepted;
* an error's text is its ``error.message`` (or ``code``/``type``), a bare string, a top-level
  ``message``, else the body (:func:`error_details`, :func:`error_from_payload`).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import httpx

from chatmem.errors import (
    ChatmemError,
    EndpointNotAllowed,
    ProviderAuthError,
    ProviderContextLength,
    ProviderError,
    ProviderRateLimited,
    ProviderRefusesTools,
)

RETRY_STATUSES = frozenset({429, 500, 502, 503, 504, 529})
_CONTEXT_PATTERNS = re.compile(
    r"context[_ ]length|maximum context|context window|too many tokens|prompt is too long|"
    r"reduce the length|exceeds? the (?:model'?s? )?(?:maximum|max)|input is too long|"
    r"longer than the model|context size",
    re.IGNORECASE,
)


class WithoutStreamOptions(Exception):
    """The server refused ``stream_options``: send the request again without it."""


class WithShortToolCallIds(Exception):
    """The server refused the history's tool call ids: send them again in its form."""


_SHORT_ID = re.compile(r"[A-Za-z0-9]{9}")
_ID_ALPHABET = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
_REFUSED_IDS = re.compile(r"tool[ _]call[ _]id\b.*\bmust be", re.IGNORECASE | re.DOTALL)


def wants_short_ids(response: httpx.Response) -> bool:
    return response.status_code in (400, 422) and bool(_REFUSED_IDS.search(response.text))


def short_id(call_id: str) -> str:
    """``call_id`` as 9 letters and digits: itself when it is that already, else drawn from
    its SHA-256 (the same id always maps alike, so a call and its result still match)."""
    if _SHORT_ID.fullmatch(call_id):
        return call_id
    number = int.from_bytes(hashlib.sha256(call_id.encode()).digest()[:8], "big")
    out = []
    for _ in range(9):
        number, digit = divmod(number, 62)
        out.append(_ID_ALPHABET[digit])
    return "".join(out)


def short_tool_call_ids(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The messages with every tool call id (an assistant's calls, a tool result's
    ``tool_call_id``) in :func:`short_id`'s form."""
    out: list[dict[str, Any]] = []
    for message in messages:
        changed = dict(message)
        if changed.get("tool_calls"):
            changed["tool_calls"] = [
                {**call, "id": short_id(str(call.get("id", "")))} for call in changed["tool_calls"]
            ]
        if changed.get("tool_call_id"):
            changed["tool_call_id"] = short_id(str(changed["tool_call_id"]))
        out.append(changed)
    return out


def refused_stream_options(response: httpx.Response) -> bool:
    return response.status_code in (400, 422) and "stream_options" in response.text


# A server without tool calling refuses a request that offers tools, each in its words:
# Ollama "<model> does not support tools" (400), vLLM '"auto" tool choice requires
# --enable-auto-tool-choice and --tool-call-parser to be set' (400), llama.cpp's server "tools
# param requires --jinja flag" (500), OpenAI "tools is not supported in this model" (400).
_TOOLS_REFUSED = re.compile(
    r"\b(?:tool(?:s| choice| calls?| calling)?|function calling)\b[^.]*?\b(?:not supported|"
    r"unsupported|requires?|"
    r"not enabled|not available|not allowed)\b"
    r"|\b(?:does not|doesn't|do not|cannot) (?:support|use|accept) (?:\w+ )?tools?\b",
    re.IGNORECASE,
)


def refuses_tools(status: int, message: str) -> bool:
    return status in (400, 422, 500, 501) and bool(_TOOLS_REFUSED.search(message))


class Retryable(Exception):
    def __init__(self, error: ChatmemError, retry_after: float | None = None) -> None:
        super().__init__(error.message)
        self.error = error
        self.retry_after = retry_after


def retry_after_of(response: httpx.Response) -> float | None:
    value = response.headers.get("retry-after")
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


def json_or_none(response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        return None


def error_details(response: httpx.Response) -> tuple[str, str | None]:
    try:
        payload = response.json()
    except ValueError:
        return (response.text.strip() or response.reason_phrase or "no details"), None
    return error_from_payload(payload)


def error_from_payload(payload: Any) -> tuple[str, str | None]:
    error = payload.get("error") if isinstance(payload, dict) else None
    if isinstance(error, dict):
        code = error.get("code") or error.get("type")
        return str(error.get("message") or code or "no details"), (str(code) if code else None)
    if isinstance(error, str):
        return error, None
    if isinstance(payload, dict) and "message" in payload:
        return str(payload["message"]), None
    return json.dumps(payload)[:500], None


def is_context_length(status: int, message: str, code: str | None) -> bool:
    if code and ("context_length" in code or "context_size" in code):
        return True
    return status in (400, 413, 422) and bool(_CONTEXT_PATTERNS.search(message))


# PROV-2: the prompt size a provider names in its context-length error, most specific first.
_NUMBER = r"(\d{1,3}(?:,\d{3})+|\d+)"
_PROMPT_TOKENS = tuple(
    re.compile(pattern, re.IGNORECASE)
    for pattern in (
        # vLLM, DeepSeek, llama-cpp-python's server: "you requested 11251 tokens (10251 in the
        # messages, 1000 in the completion)" — the messages part is the prompt.
        rf"\({_NUMBER} in the messages",
        # OpenAI: "However, your messages resulted in 11251 tokens."
        rf"messages resulted in {_NUMBER} tokens",
        # vLLM (newer): "However, your request has 11251 input tokens."
        rf"request has {_NUMBER} (?:input |prompt )?tokens",
        # llama-cpp-python: "Requested tokens (11251) exceed context window of 8192"
        rf"requested tokens \({_NUMBER}\)",
        # llama.cpp's llama-server: "request (11251 tokens) exceeds the available context size"
        rf"request \({_NUMBER} tokens\)",
        # LM Studio, Ollama: "Input length 11251 exceeds context length 8192",
        # "input length (11251) exceeds …"
        rf"input length \(?{_NUMBER}\)? exceeds",
        # Ollama's runner (logfmt): "input exceeds context length prompt=11251 limit=8192"
        rf"\bprompt={_NUMBER}",
        # Anthropic-style gateways: "prompt is too long: 211251 tokens > 200000 maximum"
        rf"prompt is too long: {_NUMBER} tokens",
        # Anything else that says how many it got: "you requested 11251 tokens" (this one may
        # include the completion; it is still what did not fit).
        rf"requested {_NUMBER} tokens",
        rf"{_NUMBER} tokens? (?:exceeds?|is more than|is greater than|>)",
    )
)
_WINDOW_TOKENS = tuple(
    re.compile(pattern, re.IGNORECASE)
    for pattern in (
        rf"maximum context length is {_NUMBER}",
        rf"context window of {_NUMBER}",
        rf"available context size \({_NUMBER} tokens\)",
        rf"context length \(?{_NUMBER}\)?",
        rf"\blimit={_NUMBER}",
        rf"> {_NUMBER} maximum",
    )
)
# Ollama: "exceeded max context length by 3059 tokens" (the window plus this is the prompt).
_EXCESS_TOKENS = re.compile(rf"exceeded max(?:imum)? context length by {_NUMBER}", re.IGNORECASE)


def _first_number(patterns: Sequence[re.Pattern[str]], text: str) -> int | None:
    for pattern in patterns:
        found = pattern.search(text)
        if found:
            return int(found.group(1).replace(",", ""))
    return None


def _payload_int(payload: Any, *names: str) -> int | None:
    """An integer field of the error object (llama-server sends ``n_prompt_tokens``, ``n_ctx``)."""
    for scope in (payload, payload.get("error") if isinstance(payload, dict) else None):
        if isinstance(scope, dict):
            for name in names:
                value = scope.get(name)
                if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                    return value
    return None


def requested_tokens(message: str, payload: Any = None) -> tuple[int | None, int | None]:
    """(prompt tokens, context window) as a provider's context-length error names them; None
    for what it does not say."""
    window = _payload_int(payload, "n_ctx", "context_window", "max_context_length")
    window = window or _first_number(_WINDOW_TOKENS, message)
    tokens = _payload_int(payload, "n_prompt_tokens", "prompt_tokens", "input_tokens")
    tokens = tokens or _first_number(_PROMPT_TOKENS, message)
    if tokens is None and window is not None:
        excess = _first_number((_EXCESS_TOKENS,), message)
        tokens = window + excess if excess is not None else None
    return tokens, window


def context_error(message: str, payload: Any = None) -> ProviderContextLength:
    """CTX-19's error, carrying the prompt size and window the provider named (PROV-2)."""
    tokens, window = requested_tokens(message, payload)
    return ProviderContextLength(requested_tokens=tokens, window=window)


def status_error(
    response: httpx.Response, scrub: Callable[[str], str], *, offered_tools: bool = False
) -> Exception:
    """What an answer with a status past 2xx means: an error to raise, or :class:`Retryable`
    around one (``scrub`` takes the key and, for a concealed endpoint, its address out of the
    server's words; ``offered_tools``: the request offered tools)."""
    status = response.status_code
    if 300 <= status < 400:
        return EndpointNotAllowed(
            "This endpoint is not allowed: it answered with a redirect, which chatmem never follows.",
            reason="redirect",
        )
    message, code = error_details(response)
    message = scrub(message)
    if is_context_length(status, message, code):
        return context_error(message, json_or_none(response))
    if status in (401, 403):
        return ProviderAuthError(f"The model API rejected the API key ({status}): {message}")
    if offered_tools and refuses_tools(status, message):
        return ProviderRefusesTools(
            f"The model API answered {status}: {message} (this model server does not take "
            "tools: turn the tools off for this conversation or model profile)",
            status=status,
        )
    if status == 429 and code == "insufficient_quota":
        # OpenAI's "You exceeded your current quota": billing, not a rate; no retry helps.
        return ProviderError(
            f"The model API says this account has no quota left (its plan and billing "
            f"decide): {message}",
            status=status,
        )
    error: ChatmemError
    if status == 429:
        error = ProviderRateLimited(f"The model API is rate limiting requests: {message}")
    else:
        error = ProviderError(f"The model API answered {status}: {message}", status=status)
    if status in RETRY_STATUSES:
        return Retryable(error, retry_after_of(response))
    return error
