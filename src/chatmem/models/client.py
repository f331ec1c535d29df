"""The model client: OpenAI-compatible Chat Completions, streamed (PROF-5).

Why httpx directly and not the ``openai`` SDK: the request is one POST and the stream is a
few lines of SSE, while everything around it must be exactly ours — the transport that pins
the checked address (PROF-4), retries only *before the first token* with our own backoff,
error mapping that recognises context-length errors from OpenAI, vLLM, llama.cpp and others by
their bodies, no environment variables read behind our back (``OPENAI_BASE_URL``, proxies),
and no provider message echoing the API key into our errors.  The SDK would add its own retry
loop, headers and environment handling we would have to switch off one by one.

The client yields typed events, in this order: :class:`ReasoningDelta` and :class:`TextDelta`
as reasoning and text arrive; a :class:`ToolCallEvent` per tool call once its deltas are
assembled; :class:`Usage` if the provider reported it (we ask with
``stream_options.include_usage``); :class:`Finish` last.

Reasoning models think before they answer, and servers hand the thinking over in one of two
ways: a field of its own in the delta (``reasoning_content``: DeepSeek, llama.cpp, vLLM;
``reasoning``: Ollama, OpenRouter, newer vLLM), or inside the text, as an answer that opens
with ``<think>…</think>`` (Qwen3 or DeepSeek-R1 on a server that does not separate it,
:class:`ThinkSplitter`).  Either way it is a :class:`ReasoningDelta`, never text: it is shown,
not remembered as the answer, so it is not sent back with the history.

Real servers' quirks (PROV-1, PROV-2, PROV-5):

- ``stream_options`` is asked for unless the endpoint once refused it (a 400/422 naming the
  field): then the request is sent again at once without it, and that endpoint is asked
  without it from then on (per base URL, for the life of the process).  A server that simply
  sends no usage (llama.cpp) is counted by the caller.
- A stream that ends with nothing in it (HTTP 200, no chunk or only ``[DONE]``) raises
  :class:`~chatmem.errors.ProviderEmptyStream`; :meth:`ModelClient.probe` sends the same
  request once without streaming (``max_tokens`` 1) to learn the real error, which is how
  llama.cpp reports a prompt beyond its context.
- A context-length error carries the prompt size the provider named, in any of the common
  wordings (:func:`context_error`), so the caller can recalibrate the profile.
- ``max_answer_bytes`` bounds one answer (text and tool-call arguments, UTF-8): past it the
  text up to the bound is yielded and :class:`~chatmem.errors.AnswerTooLarge` raised, which
  closes the stream.  A single SSE line is bounded too (:func:`_bounded_lines`), so a server
  cannot make us buffer more than a few times the bound.  Reasoning counts toward it.
- A server without tool calling refuses a request offering tools in its own words (Ollama,
  vLLM, llama.cpp without ``--jinja``): :class:`~chatmem.errors.ProviderRefusesTools`, never
  retried; the turn decides (it drops the recall tool when nobody chose it).
- A server that wants 9-character alphanumeric tool call ids (Mistral) gets the history's ids
  in that form (:func:`short_tool_call_ids`), after its first refusal and from then on.
- Parallel tool calls streamed whole without an ``index`` (Gemini) stay apart
  (:func:`_call_index`).
- OpenAI's 429 ``insufficient_quota`` (an account out of credit) is not retried.

Errors are ``chatmem.errors``: ``ProviderContextLength`` (CTX-19), ``ProviderAuthError``
(401/403), ``ProviderRateLimited`` (429 after retries), ``ProviderRefusesTools``,
``ProviderUnreachable`` (connect
failures and timeouts), ``EndpointNotAllowed`` (the policy, or a redirect), else
``ProviderError``.  The API key goes only into the ``Authorization`` header and is never
logged; provider messages are scrubbed of it before they become error text.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import random
import re
import ssl
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
import httpx

from chatmem import __version__
from chatmem.context.values import ToolCall
from chatmem.errors import (
    AnswerTooLarge,
    ChatmemError,
    EndpointNotAllowed,
    ProviderAuthError,
    ProviderContextLength,
    ProviderEmptyStream,
    ProviderError,
    ProviderRateLimited,
    ProviderRefusesTools,
    ProviderUnreachable,
)
from chatmem.security.endpoints import EndpointPolicy
from chatmem.security.network import safe_async_client
from chatmem.security.redact import KeyScrubber, scrub_provider_text

log = logging.getLogger(__name__)

#: How long the end of a stream is awaited after ``[DONE]`` to keep the connection.
DRAIN_SECONDS = 0.5
RETRY_STATUSES = frozenset({429, 500, 502, 503, 504, 529})
_CONTEXT_PATTERNS = re.compile(
    r"context[_ ]length|maximum context|context window|too many tokens|prompt is too long|"
    r"reduce the length|exceeds? the (?:model'?s? )?(?:maximum|max)|input is too long|"
    r"longer than the model|context size",
    re.IGNORECASE,
)
#: A single SSE line may hold this many characters per byte of the answer bound (JSON escapes
#: a character as up to six), plus room for the chunk's envelope.
_LINE_CHARS_PER_BYTE = 6
_LINE_SLACK = 64 * 1024


# --- events ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TextDelta:
    text: str


@dataclass(frozen=True)
class ReasoningDelta:
    """Thinking the model did before (or while) answering."""

    text: str


@dataclass(frozen=True)
class ToolCallEvent:
    call: ToolCall


@dataclass(frozen=True)
class Usage:
    prompt_tokens: int
    completion_tokens: int


@dataclass(frozen=True)
class Finish:
    reason: str | None  # "stop", "length", "tool_calls", "content_filter", … as the provider said


StreamEvent = TextDelta | ReasoningDelta | ToolCallEvent | Usage | Finish


@dataclass(frozen=True)
class Completion:
    """A whole answer, collected from the stream (:meth:`ModelClient.complete`)."""

    text: str
    tool_calls: tuple[ToolCall, ...]
    usage: Usage | None
    finish_reason: str | None


@dataclass(frozen=True)
class ModelEndpoint:
    """Where and what to call.  ``api_key`` is plaintext in memory only; never repr'd."""

    base_url: str
    model: str
    api_key: str | None = field(default=None, repr=False)
    #: The person this call is for may not see the endpoint (somebody else's shared profile,
    #: SEC-4): errors name neither its URL nor its host.
    conceal: bool = False


@dataclass(frozen=True)
class RetryPolicy:
    attempts: int = 3  # total tries before the first token
    base_delay: float = 0.5
    max_delay: float = 8.0

    def delay(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(max(retry_after, 0.0), self.max_delay)
        return min(self.base_delay * (2.0**attempt), self.max_delay) * (0.5 + random.random() / 2)


# --- the client --------------------------------------------------------------------------------


def http_pool(
    policy: EndpointPolicy,
    *,
    timeout: float,
    connect_timeout: float = 10.0,
    ssl: ssl.SSLContext | None = None,
) -> httpx.AsyncClient:
    """A connection pool for model APIs: policy-checked (SSRF), no credentials of its own.
    Every profile on one base URL shares it, so it holds as many streams as a busy server
    runs turns at once (:data:`MODEL_POOL_LIMITS`)."""
    return safe_async_client(
        policy,
        timeout=httpx.Timeout(timeout, connect=connect_timeout),
        ssl_context=ssl,
        limits=MODEL_POOL_LIMITS,
    )


#: Streams open at once to one model API, and idle connections kept for the next turns.  The
#: transport's default (20, 5 kept) made the 21st concurrent turn wait for a connection, and
#: most turns open a new one (``bench/load.py``, 100 streams).
MODEL_POOL_LIMITS = httpx.Limits(max_connections=256, max_keepalive_connections=128)


class SharedHttp:
    """One policy-checked connection pool (``httpx.AsyncClient``), used by the model clients
    of every profile on one base URL: it carries no credentials (each request sends its own
    key).  Counts the requests in flight, so a pool that is retired (evicted from
    :class:`~chatmem.models.clients.ModelClients`, or its client closed) is closed once the
    last of them ends, never under one."""

    def __init__(self, http: httpx.AsyncClient) -> None:
        self.http = http
        #: PROV-1: the server refused ``stream_options``; asked without it from then on.
        self.refuses_stream_options = False
        #: The server takes only 9-character alphanumeric tool call ids (Mistral): the
        #: history's ids are sent in that form from then on (:func:`short_tool_call_ids`).
        self.short_tool_call_ids = False
        self._active = 0
        self._retired = False
        self._closing: asyncio.Task[None] | None = None

    @asynccontextmanager
    async def lease(self) -> AsyncIterator[httpx.AsyncClient]:
        self._active += 1
        try:
            yield self.http
        finally:
            self._active -= 1
            if self._retired and self._active == 0:
                await self.http.aclose()

    async def retire(self) -> None:
        self._retired = True
        if self._active == 0:
            await self.http.aclose()

    def retire_soon(self) -> None:
        """:meth:`retire` from code that cannot await (on the event loop)."""
        if not self._retired:
            self._closing = asyncio.get_running_loop().create_task(self.retire())


class ModelClient:
    """Talks to one model endpoint (base URL, model, key).  Cheap to make when given a
    ``shared`` pool; otherwise it opens its own, closed by ``aclose()``.

    ``sleep`` is injectable so retry tests need not wait.
    """

    def __init__(
        self,
        endpoint: ModelEndpoint,
        policy: EndpointPolicy,
        *,
        timeout: float = 120.0,
        connect_timeout: float = 10.0,
        retry: RetryPolicy = RetryPolicy(),
        ssl_context: ssl.SSLContext | None = None,
        sleep: Callable[[float], Awaitable[None]] = anyio.sleep,
        max_answer_bytes: int | None = None,
        shared: SharedHttp | None = None,
    ) -> None:
        if endpoint.conceal:  # SEC-4: refusals name no host either
            policy = policy.concealed()
        policy.check_syntax(endpoint.base_url)
        self.endpoint = endpoint
        self.max_answer_bytes = max_answer_bytes
        self._retry = retry
        self._sleep = sleep
        self._timeout = timeout
        #: Sent with every request: the key travels per request, never kept in a shared pool.
        self._headers = {"User-Agent": f"chatmem/{__version__}"}
        if endpoint.api_key:
            self._headers["Authorization"] = f"Bearer {endpoint.api_key}"
        # The key's echoed forms, derived once for every provider text this client scrubs.
        self._key_scrubber = KeyScrubber(endpoint.api_key) if endpoint.api_key else None
        self._owned = shared is None
        self._shared = shared or SharedHttp(
            http_pool(policy, timeout=timeout, connect_timeout=connect_timeout, ssl=ssl_context)
        )

    async def __aenter__(self) -> ModelClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        if self._owned:
            await self._shared.retire()

    def _url(self, path: str) -> str:
        return self.endpoint.base_url.rstrip("/") + path

    @property
    def asks_usage(self) -> bool:
        """Whether streamed requests carry ``stream_options.include_usage`` (PROV-1)."""
        return not self._shared.refuses_stream_options

    # -- streaming chat -------------------------------------------------------------------------
    async def stream(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        max_tokens: int | None = None,
        extra: Mapping[str, Any] | None = None,
    ) -> AsyncIterator[StreamEvent]:
        """Stream one Chat Completions request.  Retries happen only before the first event."""
        body: dict[str, Any] = {
            "model": self.endpoint.model,
            "messages": self._history(messages),
            "stream": True,
        }
        if self.asks_usage:
            body["stream_options"] = {"include_usage": True}
        if tools:
            body["tools"] = list(tools)
        if max_tokens is not None:
            body["max_tokens"] = max_tokens
        body.update(extra or {})

        async with self._shared.lease() as http:
            async for event in self._stream(http, body):
                yield event

    def _history(self, messages: Sequence[Mapping[str, Any]]) -> list[Any]:
        """The request's messages, their tool call ids in the form this server wants
        (:func:`short_tool_call_ids`, once it has refused others)."""
        if self._shared.short_tool_call_ids:
            return short_tool_call_ids(messages)
        return list(messages)

    async def _stream(
        self, http: httpx.AsyncClient, body: dict[str, Any]
    ) -> AsyncIterator[StreamEvent]:
        attempt = 0
        while True:
            yielded = False
            try:
                async with http.stream(
                    "POST",
                    self._url("/chat/completions"),
                    json=body,
                    headers={**self._headers, "Accept": "text/event-stream"},
                ) as response:
                    if response.status_code >= 300:
                        await response.aread()
                        if "stream_options" in body and _refuses_stream_options(response):
                            raise _WithoutStreamOptions
                        if not self._shared.short_tool_call_ids and _wants_short_ids(response):
                            raise _WithShortToolCallIds
                        raise self._status_error(response, offered_tools="tools" in body)
                    async for event in _parse_stream(response, self._scrub, self.max_answer_bytes):
                        yielded = True
                        yield event
                return
            except _WithoutStreamOptions:
                # PROV-1: some servers refuse fields they do not know.  Sent again at once
                # without it (not a retry: nothing failed), and never asked there again.
                self._shared.refuses_stream_options = True
                del body["stream_options"]
                log.info("model API at %s refuses stream_options; asking without", self._host())
            except _WithShortToolCallIds:
                # Mistral: "Tool call id was call_… but must be a-z, A-Z, 0-9, with a length
                # of 9" — ids other providers made, in a conversation that changed model.
                # Sent again at once with the ids in that form, and so from then on.
                self._shared.short_tool_call_ids = True
                body["messages"] = short_tool_call_ids(body["messages"])
                log.info("model API at %s wants short tool call ids; sending them", self._host())
            except _Retryable as exc:
                if yielded or attempt + 1 >= self._retry.attempts:
                    raise exc.error from None
                delay = self._retry.delay(attempt, exc.retry_after)
                log.info("model request failed (%s); retrying in %.1fs", exc.error.code, delay)
                attempt += 1
                await self._sleep(delay)
            except (
                httpx.ConnectError,
                httpx.ConnectTimeout,
                httpx.ReadError,
                httpx.RemoteProtocolError,
            ) as exc:
                if yielded:
                    raise ProviderError(
                        f"The connection to the model API broke off ({type(exc).__name__})."
                    ) from exc
                if attempt + 1 >= self._retry.attempts:
                    raise ProviderUnreachable(
                        f"The model API at {self._host()} could not be reached."
                    ) from exc
                delay = self._retry.delay(attempt, None)
                log.info("model API unreachable; retrying in %.1fs", delay)
                attempt += 1
                await self._sleep(delay)
            except httpx.TimeoutException as exc:
                raise ProviderUnreachable(
                    f"The model API at {self._host()} did not answer within {self._timeout:g} s."
                ) from exc
            except httpx.HTTPError as exc:
                raise ProviderError(
                    f"The connection to the model API broke off ({type(exc).__name__})."
                ) from exc

    async def complete(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        max_tokens: int | None = None,
        on_delta: Callable[[str], Awaitable[None]] | None = None,
    ) -> Completion:
        """Stream and collect a whole answer (summaries, connection tests)."""
        parts: list[str] = []
        calls: list[ToolCall] = []
        usage: Usage | None = None
        reason: str | None = None
        async for event in self.stream(messages, tools=tools, max_tokens=max_tokens):
            if isinstance(event, TextDelta):
                parts.append(event.text)
                if on_delta is not None:
                    await on_delta(event.text)
            elif isinstance(event, ToolCallEvent):
                calls.append(event.call)
            elif isinstance(event, Usage):
                usage = event
            elif isinstance(event, Finish):
                reason = event.reason
        return Completion("".join(parts), tuple(calls), usage, reason)

    async def probe(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
    ) -> Usage | None:
        """PROV-2: the same request once without streaming and with ``max_tokens`` 1, after a
        stream that came back empty.  Raises the error the server gives (a context-length
        error, typically); returns the usage it reported when it answered."""
        body: dict[str, Any] = {
            "model": self.endpoint.model,
            "messages": self._history(messages),
            "stream": False,
            "max_tokens": 1,
        }
        if tools:
            body["tools"] = list(tools)
        try:
            async with self._shared.lease() as http:
                response = await http.post(
                    self._url("/chat/completions"), json=body, headers=self._headers
                )
        except (httpx.ConnectError, httpx.ConnectTimeout, httpx.TimeoutException) as exc:
            raise ProviderUnreachable(
                f"The model API at {self._host()} could not be reached."
            ) from exc
        except httpx.HTTPError as exc:
            raise ProviderError(f"The model API failed ({type(exc).__name__}).") from exc
        if response.status_code >= 300:
            error = self._status_error(response)
            raise error.error if isinstance(error, _Retryable) else error
        try:
            payload = response.json()
        except ValueError:
            return None
        if isinstance(payload, dict) and "error" in payload:
            message, code = _error_from_payload(payload)
            message = self._scrub(message)
            if _is_context_length(400, message, code):
                raise context_error(message, payload)
            raise ProviderError(f"The model API failed: {message}")
        return _usage_of(payload)

    async def list_models(self) -> list[str]:
        """``GET /models`` — the cheapest way to test a URL and key."""
        try:
            async with self._shared.lease() as http:
                response = await http.get(self._url("/models"), headers=self._headers)
        except (httpx.ConnectError, httpx.ConnectTimeout, httpx.TimeoutException) as exc:
            raise ProviderUnreachable(
                f"The model API at {self._host()} could not be reached."
            ) from exc
        except httpx.HTTPError as exc:
            raise ProviderError(f"The model API failed ({type(exc).__name__}).") from exc
        if response.status_code >= 300:
            error = self._status_error(response)
            raise error.error if isinstance(error, _Retryable) else error
        try:
            data = response.json().get("data", [])
            return [str(item.get("id")) for item in data if isinstance(item, dict)]
        except (ValueError, AttributeError):
            raise ProviderError(
                "The model API answered /models with something that is not a model list."
            ) from None

    # -- errors ---------------------------------------------------------------------------------
    def _host(self) -> str:
        if self.endpoint.conceal:
            return "this shared model's address"
        return httpx.URL(self.endpoint.base_url).host

    def _scrub(self, text: str) -> str:
        # SEC-4: the key, its masked forms and any 4+ character run of it; the endpoint too
        # for users of a shared profile.
        endpoint = self.endpoint
        return scrub_provider_text(
            text,
            self._key_scrubber,
            conceal_url=endpoint.base_url if endpoint.conceal else None,
            host=httpx.URL(endpoint.base_url).host if endpoint.conceal else None,
        )

    def _status_error(self, response: httpx.Response, *, offered_tools: bool = False) -> Exception:
        status = response.status_code
        if 300 <= status < 400:
            return EndpointNotAllowed(
                "This endpoint is not allowed: it answered with a redirect, which chatmem never follows.",
                reason="redirect",
            )
        message, code = _error_details(response)
        message = self._scrub(message)
        if _is_context_length(status, message, code):
            return context_error(message, _json_or_none(response))
        if status in (401, 403):
            return ProviderAuthError(f"The model API rejected the API key ({status}): {message}")
        if offered_tools and _refuses_tools(status, message):
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
            return _Retryable(error, _retry_after(response))
        return error


class _WithoutStreamOptions(Exception):
    """The server refused ``stream_options``: send the request again without it."""


class _WithShortToolCallIds(Exception):
    """The server refused the history's tool call ids: send them again in its form."""


_SHORT_ID = re.compile(r"[A-Za-z0-9]{9}")
_ID_ALPHABET = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
_REFUSED_IDS = re.compile(r"tool[ _]call[ _]id\b.*\bmust be", re.IGNORECASE | re.DOTALL)


def _wants_short_ids(response: httpx.Response) -> bool:
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


def _refuses_stream_options(response: httpx.Response) -> bool:
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


def _refuses_tools(status: int, message: str) -> bool:
    return status in (400, 422, 500, 501) and bool(_TOOLS_REFUSED.search(message))


class _Retryable(Exception):
    def __init__(self, error: ChatmemError, retry_after: float | None = None) -> None:
        super().__init__(error.message)
        self.error = error
        self.retry_after = retry_after


def _retry_after(response: httpx.Response) -> float | None:
    value = response.headers.get("retry-after")
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


def _json_or_none(response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        return None


def _usage_of(payload: Any) -> Usage | None:
    usage = payload.get("usage") if isinstance(payload, dict) else None
    if not isinstance(usage, dict):
        return None
    return Usage(int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0))


def _error_details(response: httpx.Response) -> tuple[str, str | None]:
    try:
        payload = response.json()
    except ValueError:
        return (response.text.strip() or response.reason_phrase or "no details"), None
    return _error_from_payload(payload)


def _error_from_payload(payload: Any) -> tuple[str, str | None]:
    error = payload.get("error") if isinstance(payload, dict) else None
    if isinstance(error, dict):
        code = error.get("code") or error.get("type")
        return str(error.get("message") or code or "no details"), (str(code) if code else None)
    if isinstance(error, str):
        return error, None
    if isinstance(payload, dict) and "message" in payload:
        return str(payload["message"]), None
    return json.dumps(payload)[:500], None


def _is_context_length(status: int, message: str, code: str | None) -> bool:
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


# --- SSE parsing -------------------------------------------------------------------------------


@dataclass
class _PendingCall:
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


_LINE_END = re.compile(r"\r\n|\r|\n")


async def _bounded_lines(response: httpx.Response, limit: int | None) -> AsyncIterator[str]:
    """The body's lines (``\n``, ``\r\n`` or ``\r`` ends one), refusing a line longer than
    ``limit`` characters without holding more of it (PROV-5)."""
    pending = ""
    async for text in response.aiter_text():
        # What is pending holds no line end, but maybe a "\r" last (the first half of "\r\n").
        scan = max(0, len(pending) - 1)
        pending += text
        start = 0
        for match in _LINE_END.finditer(pending, scan):
            if match.group() == "\r" and match.end() == len(pending):
                break  # "\r" last: a "\n" may follow in the next piece
            yield pending[start : match.start()]
            start = match.end()
        pending = pending[start:]
        if limit is not None and len(pending) > limit:
            raise _LineTooLong
    if pending:
        yield pending.rstrip("\r")


class _LineTooLong(Exception):
    pass


def _utf8_prefix(text: str, size: int) -> str:
    """The longest prefix of ``text`` of at most ``size`` UTF-8 bytes."""
    if size <= 0:
        return ""
    return text.encode("utf-8", "surrogatepass")[:size].decode("utf-8", "ignore")


def _call_index(part: Mapping[str, Any], calls: Mapping[int, _PendingCall]) -> int:
    """A tool call delta's place in the answer: its ``index``.  A server that sends none
    (Gemini's OpenAI-compatible API sends each call whole, without one) starts a new call
    with each new ``id``; a delta without either continues the last call."""
    index = part.get("index")
    if isinstance(index, int) and not isinstance(index, bool):
        return index
    if isinstance(index, str) and index.isdigit():
        return int(index)
    if not calls:
        return 0
    last = max(calls)
    new_id = part.get("id")
    return last + 1 if new_id and calls[last].id and new_id != calls[last].id else last


class ThinkSplitter:
    """Splits an answer that opens with ``<think>…</think>`` into its reasoning and its text.

    Fed the text deltas in order (a tag may be cut anywhere between two of them); an answer
    that does not open with the tag (whitespace before it aside) passes through unchanged.
    What follows ``</think>`` is the answer, its leading whitespace dropped.  A think block
    never closed (the answer ran out of tokens while thinking) is all reasoning."""

    OPEN, CLOSE = "<think>", "</think>"

    def __init__(self) -> None:
        self._state = "start"  # start → think → after → text, or start → text
        self._pending = ""

    def feed(self, text: str) -> list[StreamEvent]:
        if self._state == "text":
            return [TextDelta(text)]
        self._pending += text
        out: list[StreamEvent] = []
        if self._state == "start":
            head = self._pending.lstrip()
            if len(head) < len(self.OPEN) and self.OPEN.startswith(head):
                return out  # not decided yet
            if not head.startswith(self.OPEN):
                return self._text()
            self._state, self._pending = "think", head[len(self.OPEN) :]
        if self._state == "think":
            end = self._pending.find(self.CLOSE)
            if end < 0:
                keep = _partial_tag(self._pending, self.CLOSE)
                thought = self._pending[: len(self._pending) - keep]
                self._pending = self._pending[len(thought) :]
                return [ReasoningDelta(thought)] if thought else out
            if end:
                out.append(ReasoningDelta(self._pending[:end]))
            self._state, self._pending = "after", self._pending[end + len(self.CLOSE) :]
        rest = self._pending.lstrip()
        if rest:
            self._state, self._pending = "text", ""
            out.append(TextDelta(rest))
        else:
            self._pending = ""
        return out

    def end(self) -> list[StreamEvent]:
        """What is still held back when the answer ends."""
        if self._state == "start" and self._pending:
            return self._text()
        if self._state == "think" and self._pending:
            thought, self._pending = self._pending, ""
            return [ReasoningDelta(thought)]
        return []

    def _text(self) -> list[StreamEvent]:
        text, self._state, self._pending = self._pending, "text", ""
        return [TextDelta(text)] if text else []


def _partial_tag(text: str, tag: str) -> int:
    """The length of the longest end of ``text`` that begins ``tag`` (a tag cut in two)."""
    for n in range(min(len(text), len(tag) - 1), 0, -1):
        if tag.startswith(text[-n:]):
            return n
    return 0


async def _parse_stream(
    response: httpx.Response, scrub: Callable[[str], str], limit: int | None = None
) -> AsyncIterator[StreamEvent]:
    calls: dict[int, _PendingCall] = {}
    finish: str | None = None
    usage: Usage | None = None
    done = False
    data_lines: list[str] = []
    #: Bytes of text and tool-call arguments so far (PROV-5), and whether anything of an
    #: answer arrived at all (PROV-2: an empty stream).
    size = 0
    received = False

    def flush_calls() -> list[StreamEvent]:
        out: list[StreamEvent] = [
            ToolCallEvent(
                ToolCall(
                    id=c.id or f"call_{uuid.uuid4().hex[:12]}",
                    name=c.name,
                    arguments="".join(c.arguments) or "{}",
                )
            )
            for _, c in sorted(calls.items())
        ]
        calls.clear()
        return out

    line_limit = None if limit is None else limit * _LINE_CHARS_PER_BYTE + _LINE_SLACK
    lines = _bounded_lines(response, line_limit)
    think = ThinkSplitter()
    try:
        async for line in lines:
            if line.startswith(":"):
                continue
            if line.startswith("data:"):
                data_lines.append(line[5:].lstrip(" "))
                continue
            if line.strip() or not data_lines:
                continue  # "event:", "id:", "retry:" lines carry nothing we need
            data = "\n".join(data_lines)
            data_lines = []
            if data.strip() == "[DONE]":
                done = True
                break
            try:
                chunk = json.loads(data)
            except ValueError:
                raise ProviderError("The model API sent a malformed stream.") from None
            if not isinstance(chunk, dict):
                continue
            if "error" in chunk:
                message, code = _error_from_payload(chunk)
                message = scrub(message)
                if _is_context_length(400, message, code):
                    raise context_error(message, chunk)
                raise ProviderError(f"The model API failed mid-answer: {message}")
            if isinstance(chunk.get("usage"), dict):
                usage = _usage_of(chunk)
            for choice in chunk.get("choices") or []:
                if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                    continue
                delta = choice.get("delta") or {}
                reasoning = delta.get("reasoning_content") or delta.get("reasoning")
                if isinstance(reasoning, str) and reasoning:
                    received = True
                    if limit is not None:
                        size += len(reasoning.encode("utf-8", "surrogatepass"))
                        if size > limit:
                            raise AnswerTooLarge(limit)
                    yield ReasoningDelta(reasoning)
                text = delta.get("content")
                if isinstance(text, str) and text:
                    received = True
                    if limit is not None:
                        room = limit - size
                        size += len(text.encode("utf-8", "surrogatepass"))
                        if size > limit:
                            for event in think.feed(_utf8_prefix(text, room)) + think.end():
                                yield event
                            raise AnswerTooLarge(limit)
                    for event in think.feed(text):
                        yield event
                for part in delta.get("tool_calls") or []:
                    received = True
                    pending = calls.setdefault(_call_index(part, calls), _PendingCall())
                    pending.id = pending.id or str(part.get("id") or "")
                    fn = part.get("function") or {}
                    pending.name = pending.name or str(fn.get("name") or "")
                    if fn.get("arguments"):
                        argument = str(fn["arguments"])
                        if limit is not None:
                            size += len(argument.encode("utf-8", "surrogatepass"))
                            if size > limit:
                                raise AnswerTooLarge(limit)
                        pending.arguments.append(argument)
                if choice.get("finish_reason"):
                    received = True
                    finish = str(choice["finish_reason"])
                    for event in think.end() + flush_calls():
                        yield event
    except _LineTooLong:
        assert limit is not None
        raise AnswerTooLarge(limit) from None
    if not received:
        raise ProviderEmptyStream()
    if not done and finish is None:
        raise ProviderError("The model API's stream ended before the answer was complete.")
    if done:
        # The body ends right after [DONE]; reading that end lets the connection go back to
        # the pool for the next request (keep-alive) instead of being closed.  A provider
        # that keeps the body open gets a moment, then the connection is closed.
        with anyio.move_on_after(DRAIN_SECONDS):
            async for _line in lines:
                pass
    for event in think.end() + flush_calls():
        yield event
    if usage is not None:
        yield usage
    yield Finish(finish)
