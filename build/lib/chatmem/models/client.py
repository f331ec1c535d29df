"""The model client: OpenAI-compatible Chat Completions, streamed (PROF-5).

Why httpx directly and not the ``openai`` SDK: the request is one POST and the stream is a
few lines of SSE, while everything around it must be exactly ours — the transport that pins
the checked address (PROF-4), retries only *before the first token* with our own backoff,
error mapping that recognises context-length errors from OpenAI, vLLM, llama.cpp and others by
their bodies, no environment variables read behind our back (``OPENAI_BASE_URL``, proxies),
and no provider message echoing the API key into our errors.  The SDK would add its own retry
loop, headers and environment handling we would have to switch off one by one.

The client yields the typed events of :mod:`chatmem.models.stream` (its SSE parser); the
rules that read a server's refusals and errors are :mod:`chatmem.models.refusals`, the
connection pools of the base URLs :mod:`chatmem.models.pool`.

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
  wordings (:func:`~chatmem.models.refusals.context_error`), so the caller can recalibrate
  the profile.
- ``max_answer_bytes`` bounds one answer (text and tool-call arguments, UTF-8): past it the
  text up to the bound is yielded and :class:`~chatmem.errors.AnswerTooLarge` raised, which
  closes the stream.  A single SSE line is bounded too (:mod:`~chatmem.models.stream`), so a
  server cannot make us buffer more than a few times the bound.  Reasoning counts toward it.
- A server without tool calling refuses a request offering tools in its own words (Ollama,
  vLLM, llama.cpp without ``--jinja``): :class:`~chatmem.errors.ProviderRefusesTools`, never
  retried; the turn decides (it drops the recall tool when nobody chose it).
- A server that wants 9-character alphanumeric tool call ids (Mistral) gets the history's ids
  in that form (:func:`~chatmem.models.refusals.short_tool_call_ids`), after its first
  refusal and from then on.
- Parallel tool calls streamed whole without an ``index`` (Gemini) stay apart
  (:mod:`~chatmem.models.stream`).
- OpenAI's 429 ``insufficient_quota`` (an account out of credit) is not retried.

Errors are ``chatmem.errors``: ``ProviderContextLength`` (CTX-19), ``ProviderAuthError``
(401/403), ``ProviderRateLimited`` (429 after retries), ``ProviderRefusesTools``,
``ProviderUnreachable`` (connect failures and timeouts), ``EndpointNotAllowed`` (the policy,
or a redirect), else ``ProviderError``.  The API key goes only into the ``Authorization``
header and is never logged; provider messages are scrubbed of it before they become error
text.
"""

from __future__ import annotations

import logging
import random
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio
import httpx

from chatmem import __version__
from chatmem.context.values import ToolCall
from chatmem.errors import ProviderError, ProviderUnreachable
from chatmem.models.pool import SharedHttp, http_pool
from chatmem.models.refusals import (
    Retryable,
    WithoutStreamOptions,
    WithShortToolCallIds,
    context_error,
    error_from_payload,
    is_context_length,
    refused_stream_options,
    short_tool_call_ids,
    status_error,
    wants_short_ids,
)
from chatmem.models.stream import (
    Completion,
    Finish,
    StreamEvent,
    TextDelta,
    ToolCallEvent,
    Usage,
    parse_stream,
    usage_of,
)
from chatmem.security.endpoints import EndpointPolicy
from chatmem.security.redact import KeyScrubber, scrub_provider_text

log = logging.getLogger(__name__)


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
                        if "stream_options" in body and refused_stream_options(response):
                            raise WithoutStreamOptions
                        if not self._shared.short_tool_call_ids and wants_short_ids(response):
                            raise WithShortToolCallIds
                        raise status_error(response, self._scrub, offered_tools="tools" in body)
                    async for event in parse_stream(response, self._scrub, self.max_answer_bytes):
                        yielded = True
                        yield event
                return
            except WithoutStreamOptions:
                # PROV-1: some servers refuse fields they do not know.  Sent again at once
                # without it (not a retry: nothing failed), and never asked there again.
                self._shared.refuses_stream_options = True
                del body["stream_options"]
                log.info("model API at %s refuses stream_options; asking without", self._host())
            except WithShortToolCallIds:
                # Mistral: "Tool call id was call_… but must be a-z, A-Z, 0-9, with a length
                # of 9" — ids other providers made, in a conversation that changed model.
                # Sent again at once with the ids in that form, and so from then on.
                self._shared.short_tool_call_ids = True
                body["messages"] = short_tool_call_ids(body["messages"])
                log.info("model API at %s wants short tool call ids; sending them", self._host())
            except Retryable as exc:
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
            error = status_error(response, self._scrub)
            raise error.error if isinstance(error, Retryable) else error
        try:
            payload = response.json()
        except ValueError:
            return None
        if isinstance(payload, dict) and "error" in payload:
            message, code = error_from_payload(payload)
            message = self._scrub(message)
            if is_context_length(400, message, code):
                raise context_error(message, payload)
            raise ProviderError(f"The model API failed: {message}")
        return usage_of(payload)

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
            error = status_error(response, self._scrub)
            raise error.error if isinstance(error, Retryable) else error
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
