"""A scriptable fake of an OpenAI-compatible model API, over real HTTP on loopback.

The whole suite talks to this instead of a real provider (STYLE: fakes at seams, the real wire
protocol).  It is a ``ThreadingHTTPServer`` on ``127.0.0.1`` with a random port, running in a
background thread; chatmem's real client (SSRF transport included) connects to it.  Tests
therefore need ``allow_private_endpoints=True`` (it is plain http on loopback).

Endpoints: ``POST /v1/chat/completions`` (streaming SSE and plain JSON), ``GET /v1/models``.

Script it per test — each queued step answers exactly one chat request, in order; when the
queue is empty the server answers ``default_reply`` (so UI tests need not script anything)::

    def test_something(model_server):                      # the pytest fixture
        model_server.reply("Hello there!")                 # text, chunked into deltas
        model_server.tool_call("search", {"q": "cats"})    # one tool call (args streamed in parts)
        model_server.error(429, {"error": {...}})          # HTTP error with a JSON body
        model_server.expected_api_key = "sk-…"              # 401 for any other key
        model_server.models = None                         # GET /v1/models → 404
        model_server.context_length_error()                # OpenAI's 400 context_length_exceeded
        model_server.reply("slow", delay=0.2)              # 0.2 s between chunks
        model_server.hang()                                # accept and never answer
        model_server.redirect("https://169.254.169.254/")  # a 302
        model_server.reply("cut", break_after=1)           # drop the connection mid-stream
        model_server.reply("a b c d", hold_after=2)        # 2 chunks, then wait for release()
        model_server.reply("hi", report_usage=False)       # no usage even when asked (llama.cpp)
        model_server.reply("hi", usage=(90, 8, 64, 5))     # with cached and reasoning tokens
        model_server.reject_field("stream_options")        # 400 naming a field it does not know
        model_server.empty_stream()                        # HTTP 200, no chunk, only [DONE]
        model_server.context_length_error("vllm", tokens=11251, window=8192)  # each wording
        model_server.large_reply(5_000_000)                # a huge answer in 16 KB chunks
        model_server.limit_context(8192, style="llama_cpp")  # count every request (server-wide)
        model_server.report_usage(False)                   # no usage in any stream (server-wide)
        model_server.refuse_tools("ollama")                # no tool calling (server-wide)
        ...
        model_server.requests[-1].body["messages"]         # exactly what chatmem sent
        model_server.requests[-1].headers["authorization"]

``model_server.base_url`` is ``http://127.0.0.1:PORT/v1`` — put it in a profile.  A usage
chunk ends the stream when the request asked for ``stream_options.include_usage`` (unless
the step says ``report_usage=False``, as llama.cpp never sends one).

``limit_context(window, style=…)`` makes the server count each request's prompt (one token
per character of the messages' text and the tools' JSON, times ``per_char``: more than
chatmem's estimate, as a real tokenizer on digits is) and refuse those beyond ``window``
without consuming a step, the way the named server does: ``llama_cpp`` answers a stream with
an empty HTTP 200 and a plain request with its 400 ("Requested tokens (N) exceed context
window of W"); the others answer 400 with their wording (:data:`CONTEXT_ERRORS`) either way.

As a subprocess (for tests that run a real ``chatmem serve``)::

    python -m tests.support.model_server --port 0     # prints "READY http://127.0.0.1:PORT/v1"

and script it over HTTP with :class:`RemoteModelServer` (``POST /_control/script``,
``GET /_control/requests``, ``POST /_control/reset``); it has the same scripting methods.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import socket
import ssl
import sys
import threading
import time
import urllib.request
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

DEFAULT_REPLY = "This is the fake model's answer."
CONTEXT_LENGTH_BODY: dict[str, Any] = {
    "error": {
        "message": (
            "This model's maximum context length is 8192 tokens. However, your messages "
            "resulted in 9000 tokens. Please reduce the length of the messages."
        ),
        "type": "invalid_request_error",
        "param": "messages",
        "code": "context_length_exceeded",
    }
}


#: What a server without tool calling answers a request that offers tools: status and body.
TOOLS_REFUSALS: dict[str, tuple[int, dict[str, Any]]] = {
    "ollama": (400, {"error": "registry.ollama.ai/library/gemma3:270m does not support tools"}),
    "vllm": (
        400,
        {
            "object": "error",
            "message": '"auto" tool choice requires --enable-auto-tool-choice and '
            "--tool-call-parser to be set",
            "type": "BadRequestError",
            "param": None,
            "code": 400,
        },
    ),
    "llama_cpp": (
        500,
        {
            "error": {
                "code": 500,
                "message": "tools param requires --jinja flag",
                "type": "server_error",
            }
        },
    ),
}


def _long_tool_call_ids(body: dict[str, Any]) -> Iterator[str]:
    """The tool call ids of a request's history that Mistral refuses (not 9 alphanumerics)."""
    for message in body.get("messages") or []:
        ids = [c.get("id", "") for c in message.get("tool_calls") or []]
        ids += [message["tool_call_id"]] if message.get("tool_call_id") else []
        for call_id in ids:
            if not (len(call_id) == 9 and call_id.isascii() and call_id.isalnum()):
                yield str(call_id)


def _openai_error(message: str, code: str | None = "context_length_exceeded") -> dict[str, Any]:
    return {
        "error": {
            "message": message,
            "type": "invalid_request_error",
            "param": "messages",
            "code": code,
        }
    }


#: How each server says "too long", by style: (HTTP status, body) for ``tokens`` in ``window``.
CONTEXT_ERRORS: dict[str, Any] = {
    "openai": lambda tokens, window: (
        400,
        _openai_error(
            f"This model's maximum context length is {window} tokens. However, your messages "
            f"resulted in {tokens} tokens. Please reduce the length of the messages."
        ),
    ),
    "vllm": lambda tokens, window: (
        400,
        {
            "object": "error",
            "message": (
                f"This model's maximum context length is {window} tokens. However, you "
                f"requested {tokens + 1000} tokens ({tokens} in the messages, 1000 in the "
                "completion). Please reduce the length of the messages or completion."
            ),
            "type": "BadRequestError",
            "param": None,
            "code": 400,
        },
    ),
    "vllm_new": lambda tokens, window: (
        400,
        _openai_error(
            f"This model's maximum context length is {window} tokens. However, your request "
            f"has {tokens} input tokens. Please reduce the length of the input messages.",
            code=None,
        ),
    ),
    # llama-cpp-python's own exception text, as its server passes it on.
    "llama_cpp": lambda tokens, window: (
        400,
        _openai_error(f"Requested tokens ({tokens}) exceed context window of {window}", code=None),
    ),
    # llama.cpp's C++ llama-server.
    "llama_server": lambda tokens, window: (
        400,
        {
            "error": {
                "code": 400,
                "message": (
                    f"request ({tokens} tokens) exceeds the available context size "
                    f"({window} tokens), try increasing it"
                ),
                "type": "exceed_context_size_error",
                "n_prompt_tokens": tokens,
                "n_ctx": window,
            }
        },
    ),
    "ollama": lambda tokens, window: (
        400,
        {
            "error": {
                "message": (
                    f"input length exceeds the context length: prompt={tokens} limit={window}"
                ),
                "type": "api_error",
                "param": None,
                "code": None,
            }
        },
    ),
    # Ollama's plain form names no count.
    "ollama_plain": lambda tokens, window: (
        400,
        {"error": {"message": "the input length exceeds the context length", "code": None}},
    ),
    "lmstudio": lambda tokens, window: (
        400,
        {"error": f"Input length {tokens} exceeds context length {window}"},
    ),
}


@dataclass(frozen=True)
class RecordedRequest:
    """One request as the server received it.  Header names are lower case."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any  # parsed JSON, or None

    @property
    def messages(self) -> list[dict[str, Any]]:
        return list((self.body or {}).get("messages", []))


class _Scripting:
    """The scripting vocabulary shared by the in-process server and the remote control.

    A step is a JSON-able dict, so the same steps travel to a subprocess unchanged.
    """

    def _enqueue(self, step: dict[str, Any]) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def reply(
        self,
        text: str,
        *,
        chunks: list[str] | None = None,
        delay: float = 0.0,
        usage: tuple[int, ...] | None = None,
        finish_reason: str = "stop",
        break_after: int | None = None,
        report_usage: bool = True,
        reasoning: str | None = None,
        reasoning_field: str = "reasoning_content",
        hold_after: int | None = None,
    ) -> None:
        """Answer with ``text``.  Streamed as ``chunks`` (default: word by word), ``delay``
        seconds apart.  ``usage`` = (prompt, completion) tokens, default a rough count; (prompt,
        completion, cached, reasoning) also reports OpenAI's usage details.
        ``break_after=n`` closes the connection after n chunks, without ``[DONE]``.
        ``report_usage=False``: no usage chunk even when asked (llama.cpp's server).
        ``reasoning``: a reasoning model's thinking, streamed word by word before the text in
        the delta's ``reasoning_field`` (``reasoning_content``: DeepSeek, llama.cpp, vLLM;
        ``reasoning``: Ollama, OpenRouter); put ``<think>…</think>`` in ``text`` for a
        server that leaves it in the answer.  ``hold_after=n``: after n chunks the stream
        waits for :meth:`release` (what the client got by then, it got while the answer was
        still coming: nothing held it back)."""
        self._enqueue(
            {
                "kind": "text",
                "text": text,
                "reasoning": reasoning,
                "reasoning_field": reasoning_field,
                "chunks": chunks,
                "delay": delay,
                "usage": list(usage) if usage else None,
                "finish_reason": finish_reason,
                "break_after": break_after,
                "report_usage": report_usage,
                "hold_after": hold_after,
            }
        )

    def large_reply(self, size: int, *, piece: str = "0123456789abcdef" * 1024) -> None:
        """Answer with ``size`` bytes of text (ASCII ``piece`` repeated), streamed a piece per
        chunk: a runaway answer (PROV-5) without scripting megabytes."""
        self._enqueue(
            {
                "kind": "text",
                "text": "",
                "piece": piece,
                "size": size,
                "usage": None,
                "finish_reason": "stop",
            }
        )

    def empty_stream(self, *, done: bool = True) -> None:
        """HTTP 200 and nothing in the stream: only ``[DONE]`` (or not even that)."""
        self._enqueue({"kind": "empty", "done": done})

    def reject_field(self, field: str = "stream_options", *, status: int = 400) -> None:
        """The next request that carries ``field`` is refused as an unknown argument (a
        request without it passes to the next step)."""
        self._enqueue({"kind": "reject_field", "field": field, "status": status})

    def limit_context(
        self, window: int | None, *, style: str = "llama_cpp", per_char: float = 1.0
    ) -> None:
        """Server-wide: refuse every request whose prompt counts more than ``window`` tokens
        (see the module docstring); ``None`` lifts the limit."""
        self._set_option(
            "context",
            None if window is None else {"window": window, "style": style, "per_char": per_char},
        )

    def report_usage(self, enabled: bool) -> None:
        """Server-wide: ``False`` never sends usage in a stream, as llama.cpp's server."""
        self._set_option("no_usage", None if enabled else True)

    def refuse_tools(self, style: str | None = "ollama") -> None:
        """Server-wide: refuse every request that offers tools, in the named server's words
        (:data:`TOOLS_REFUSALS`: a model without tool calling); ``None`` accepts them again."""
        self._set_option("refuse_tools", style)

    def short_tool_call_ids(self, enabled: bool = True) -> None:
        """Server-wide: refuse a request whose history holds a tool call id that is not 9
        letters and digits, in Mistral's words."""
        self._set_option("short_tool_call_ids", True if enabled else None)

    def _set_option(self, name: str, value: Any) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def tool_call(
        self,
        name: str,
        arguments: Mapping[str, Any] | str = "{}",
        *,
        id: str | None = None,
        text: str = "",
        usage: tuple[int, ...] | None = None,
        report_usage: bool = True,
    ) -> None:
        """Answer with one tool call (optionally after some text)."""
        self.tool_calls([(name, arguments, id)], text=text, usage=usage, report_usage=report_usage)

    def tool_calls(
        self,
        calls: list[tuple[str, Mapping[str, Any] | str, str | None]],
        *,
        text: str = "",
        usage: tuple[int, ...] | None = None,
        report_usage: bool = True,
        whole: bool = False,
    ) -> None:
        """Answer with several tool calls: ``[(name, arguments, id or None), …]``, their
        arguments streamed in parts; ``whole``: each call in one chunk without an ``index``
        (Gemini's OpenAI-compatible API)."""
        self._enqueue(
            {
                "kind": "tool_calls",
                "whole": whole,
                "report_usage": report_usage,
                "text": text,
                "calls": [
                    {
                        "id": cid or f"call_{uuid.uuid4().hex[:12]}",
                        "name": name,
                        "arguments": args if isinstance(args, str) else json.dumps(args),
                    }
                    for name, args, cid in calls
                ],
                "usage": list(usage) if usage else None,
            }
        )

    def error(
        self,
        status: int,
        body: Mapping[str, Any] | str | None = None,
        *,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        """Answer with an HTTP error.  ``body`` default: an OpenAI-shaped error object."""
        if body is None:
            body = {"error": {"message": f"fake error {status}", "type": "server_error"}}
        self._enqueue(
            {"kind": "error", "status": status, "body": body, "headers": dict(headers or {})}
        )

    def context_length_error(
        self, style: str | None = None, *, tokens: int = 9000, window: int = 8192
    ) -> None:
        """A server's answer to a request longer than its window (CTX-19): OpenAI's by
        default, or ``style``'s wording naming ``tokens`` (:data:`CONTEXT_ERRORS`)."""
        if style is None:
            self.error(400, CONTEXT_LENGTH_BODY)
            return
        status, body = CONTEXT_ERRORS[style](tokens, window)
        self.error(status, body)

    def release(self) -> None:
        """Lets the stream held by ``reply(…, hold_after=n)`` go on (each such stream waits
        anew when it starts)."""
        self._set_option("_released", True)

    def hang(self, seconds: float | None = None) -> None:
        """Accept the request and send nothing (for ``seconds``, or until the server stops)."""
        self._enqueue({"kind": "hang", "seconds": seconds})

    def redirect(self, location: str, status: int = 302) -> None:
        self._enqueue({"kind": "redirect", "status": status, "location": location})


class FakeModelServer(_Scripting):
    """The in-process server.  ``start()``/``stop()`` or use as a context manager."""

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        ssl_context: ssl.SSLContext | None = None,
        models: list[str] | None = None,
    ) -> None:
        self._lock = threading.Lock()
        self._script: list[dict[str, Any]] = []
        self._requests: list[RecordedRequest] = []
        self._stopping = threading.Event()
        self._released = threading.Event()  # reply(hold_after=…) waits for it
        self.default_reply = DEFAULT_REPLY
        # ``None`` makes GET /v1/models answer 404 (APIs without a model list).
        self.models: list[str] | None = models or ["fake-model", "fake-model-mini"]
        # When set, requests without ``Authorization: Bearer <expected_api_key>`` get OpenAI's 401.
        self.expected_api_key: str | None = None
        #: Server-wide behaviour set with ``limit_context`` (and over ``/_control/options``).
        self.options: dict[str, Any] = {}
        self._httpd = ThreadingHTTPServer((host, port), _handler_for(self))
        self._httpd.daemon_threads = True
        if ssl_context is not None:
            self._httpd.socket = ssl_context.wrap_socket(self._httpd.socket, server_side=True)
        self.scheme = "https" if ssl_context is not None else "http"
        self._thread: threading.Thread | None = None

    # -- lifecycle ----------------------------------------------------------------------------
    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    @property
    def base_url(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self.port}/v1"

    def start(self) -> FakeModelServer:
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, args=(0.05,), name="fake-model-server", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()  # releases hanging handlers
        self._released.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> FakeModelServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- scripting and inspection --------------------------------------------------------------
    def _enqueue(self, step: dict[str, Any]) -> None:
        with self._lock:
            self._script.append(step)

    def _set_option(self, name: str, value: Any) -> None:
        if name == "_released":  # release(), also over /_control/options from another process
            self._released.set()
            return
        with self._lock:
            if value is None:
                self.options.pop(name, None)
            else:
                self.options[name] = value

    def _next_step(self) -> dict[str, Any]:
        with self._lock:
            if self._script:
                return self._script.pop(0)
        return {"kind": "text", "text": self.default_reply}

    def _record(self, request: RecordedRequest) -> None:
        with self._lock:
            self._requests.append(request)

    @property
    def requests(self) -> list[RecordedRequest]:
        """Every request received so far (a copy), oldest first."""
        with self._lock:
            return list(self._requests)

    @property
    def chat_requests(self) -> list[RecordedRequest]:
        return [r for r in self.requests if r.path.endswith("/chat/completions")]

    @property
    def pending(self) -> int:
        """Scripted steps not consumed yet."""
        with self._lock:
            return len(self._script)

    def reset(self) -> None:
        with self._lock:
            self._script.clear()
            self._requests.clear()
            self.options.clear()
            self._released.clear()


# --- the wire protocol ---------------------------------------------------------------------------


def _words(text: str) -> list[str]:
    parts: list[str] = []
    for i, word in enumerate(text.split(" ")):
        parts.append(word if i == 0 else " " + word)
    return [p for p in parts if p] or [""]


def _rough_tokens(value: Any) -> int:
    return max(1, len(json.dumps(value)) // 4)


def _pieces(piece: str, size: int) -> Iterator[str]:
    """``piece`` repeated up to ``size`` characters in all (the last one cut)."""
    while size > 0:
        yield piece[:size]
        size -= len(piece)


def prompt_tokens(body: dict[str, Any], per_char: float = 1.0) -> int:
    """The fake's own prompt count (``limit_context``): one token per character of every
    message's text and of the tools' JSON, times ``per_char``, plus 4 per message."""
    chars = 0
    messages = body.get("messages") or []
    for message in messages:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, str):
            chars += len(content)
        elif content is not None:
            chars += len(json.dumps(content))
        if isinstance(message, dict) and message.get("tool_calls"):
            chars += len(json.dumps(message["tool_calls"]))
    if body.get("tools"):
        chars += len(json.dumps(body["tools"]))
    return int(chars * per_char) + 4 * len(messages)


def _chunk(
    cid: str, model: str, delta: dict[str, Any], finish: str | None = None
) -> dict[str, Any]:
    return {
        "id": cid,
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
    }


#: Marks, among a stream's chunks, where ``reply(hold_after=n)`` waits for ``release()``.
HOLD: dict[str, Any] = {}


def _stream_events(step: dict[str, Any], body: dict[str, Any]) -> Iterator[dict[str, Any] | None]:
    """The chunks of a streamed answer; ``None`` marks "drop the connection here"."""
    cid = f"chatcmpl-{uuid.uuid4().hex[:16]}"
    model = str(body.get("model", "fake-model"))
    yield _chunk(cid, model, {"role": "assistant", "content": ""})
    sent = 0
    for part in _words(step["reasoning"]) if step.get("reasoning") else []:
        yield _chunk(cid, model, {str(step.get("reasoning_field")): part})
    text_parts: Any = step.get("chunks") or (_words(step["text"]) if step.get("text") else [])
    if step.get("piece"):
        text_parts = _pieces(step["piece"], int(step["size"]))
    for part in text_parts:
        if sent == step.get("hold_after"):
            yield HOLD
        if step.get("break_after") is not None and sent >= step["break_after"]:
            yield None
            return
        yield _chunk(cid, model, {"content": part})
        sent += 1
    finish = step.get("finish_reason") or "stop"
    if step["kind"] == "tool_calls":
        finish = "tool_calls"
        for index, call in enumerate(step["calls"]):
            if step.get("whole"):
                function = {"name": call["name"], "arguments": call["arguments"]}
                yield _chunk(
                    cid,
                    model,
                    {"tool_calls": [{"id": call["id"], "type": "function", "function": function}]},
                )
                continue
            yield _chunk(
                cid,
                model,
                {
                    "tool_calls": [
                        {
                            "index": index,
                            "id": call["id"],
                            "type": "function",
                            "function": {"name": call["name"], "arguments": ""},
                        }
                    ]
                },
            )
            args = call["arguments"]
            third = max(1, len(args) // 3)
            for start in range(0, len(args), third):
                yield _chunk(
                    cid,
                    model,
                    {
                        "tool_calls": [
                            {"index": index, "function": {"arguments": args[start : start + third]}}
                        ]
                    },
                )
    yield _chunk(cid, model, {}, finish)
    if step.get("report_usage", True) and (body.get("stream_options") or {}).get("include_usage"):
        usage = step.get("usage") or [_rough_tokens(body.get("messages")), max(1, sent)]
        yield {
            "id": cid,
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": model,
            "choices": [],
            "usage": _usage_json(usage),
        }


def _usage_json(usage: list[int]) -> dict[str, Any]:
    """OpenAI's usage object of (prompt, completion[, cached, reasoning]) tokens: the details
    only when scripted (most servers report none)."""
    body: dict[str, Any] = {
        "prompt_tokens": usage[0],
        "completion_tokens": usage[1],
        "total_tokens": usage[0] + usage[1],
    }
    if len(usage) > 2:
        body["prompt_tokens_details"] = {"cached_tokens": usage[2]}
    if len(usage) > 3:
        body["completion_tokens_details"] = {"reasoning_tokens": usage[3]}
    return body


def _completion(step: dict[str, Any], body: dict[str, Any]) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": step.get("text") or None}
    finish = step.get("finish_reason") or "stop"
    if step["kind"] == "tool_calls":
        finish = "tool_calls"
        message["tool_calls"] = [
            {
                "id": c["id"],
                "type": "function",
                "function": {"name": c["name"], "arguments": c["arguments"]},
            }
            for c in step["calls"]
        ]
    usage = step.get("usage") or [_rough_tokens(body.get("messages")), _rough_tokens(message)]
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex[:16]}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body.get("model", "fake-model"),
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": _usage_json(usage),
    }


def _handler_for(server: FakeModelServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        # Each SSE chunk is its own small write: without TCP_NODELAY a kept-alive
        # connection waits on the client's delayed ACK (~40 ms) between them, as no real
        # provider's server does.
        disable_nagle_algorithm = True

        def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
            pass

        def handle(self) -> None:
            # The client may drop a kept-alive connection (a stopped stream): not an error.
            with contextlib.suppress(ConnectionResetError, BrokenPipeError):
                super().handle()

        # -- helpers ---------------------------------------------------------------------------
        def _read_json(self) -> Any:
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                return json.loads(raw) if raw else None
            except ValueError:
                return raw.decode("utf-8", "replace")

        def _send_json(
            self, status: int, payload: Any, headers: Mapping[str, str] | None = None
        ) -> None:
            data = (payload if isinstance(payload, str) else json.dumps(payload)).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(data)

        def _refuse_key(self) -> bool:
            expected = server.expected_api_key
            if expected is None or self.headers.get("authorization") == f"Bearer {expected}":
                return False
            sent = (self.headers.get("authorization") or "").removeprefix("Bearer ")
            shown = f"{sent[:3]}***{sent[-4:]}" if sent else "(none)"
            self._send_json(
                401,
                {
                    "error": {
                        "message": f"Incorrect API key provided: {shown}.",
                        "type": "invalid_request_error",
                        "param": None,
                        "code": "invalid_api_key",
                    }
                },
            )
            return True

        def _record(self, body: Any) -> None:
            server._record(
                RecordedRequest(
                    method=self.command,
                    path=self.path,
                    headers={k.lower(): v for k, v in self.headers.items()},
                    body=body,
                )
            )

        # -- routes ----------------------------------------------------------------------------
        def do_GET(self) -> None:
            if self.path == "/_control/requests":
                self._send_json(200, [r.__dict__ for r in server.requests])
                return
            self._record(None)
            if self._refuse_key():
                return
            if self.path.rstrip("/").endswith("/models") and server.models is not None:
                self._send_json(
                    200,
                    {
                        "object": "list",
                        "data": [
                            {"id": m, "object": "model", "owned_by": "fake"} for m in server.models
                        ],
                    },
                )
            else:
                self._send_json(
                    404, {"error": {"message": "not found", "type": "invalid_request_error"}}
                )

        def do_POST(self) -> None:
            body = self._read_json()
            if self.path.startswith("/_control/"):
                self._control(body)
                return
            self._record(body)
            if self._refuse_key():
                return
            if not self.path.rstrip("/").endswith("/chat/completions"):
                self._send_json(
                    404, {"error": {"message": "not found", "type": "invalid_request_error"}}
                )
                return
            if not isinstance(body, dict):
                self._send_json(
                    400,
                    {"error": {"message": "body must be JSON", "type": "invalid_request_error"}},
                )
                return
            limit = server.options.get("context")
            if limit is not None:
                tokens = prompt_tokens(body, float(limit.get("per_char", 1.0)))
                if tokens > int(limit["window"]):
                    self._refuse_context(body, tokens, int(limit["window"]), limit["style"])
                    return
            if server.options.get("short_tool_call_ids"):
                long_id = next(iter(_long_tool_call_ids(body)), None)
                if long_id is not None:
                    message = (
                        f"Tool call id was {long_id} but must be a-z, A-Z, 0-9, with a length of 9."
                    )
                    self._send_json(
                        400,
                        {"object": "error", "message": message, "type": "invalid_request_error"},
                    )
                    return
            refusing = server.options.get("refuse_tools")
            if refusing is not None and body.get("tools"):
                self._send_json(*TOOLS_REFUSALS[refusing])
                return
            step = server._next_step()
            while step["kind"] == "reject_field" and step["field"] not in body:
                step = server._next_step()
            kind = step["kind"]
            if kind == "reject_field":
                self._send_json(
                    step["status"],
                    _openai_error(
                        f"Unrecognized request argument supplied: {step['field']}", code=None
                    ),
                )
            elif kind == "empty":
                self._empty_stream(bool(step.get("done", True)))
            elif kind == "error":
                self._send_json(step["status"], step["body"], step.get("headers"))
            elif kind == "redirect":
                self.send_response(step["status"])
                self.send_header("Location", step["location"])
                self.send_header("Content-Length", "0")
                self.end_headers()
            elif kind == "hang":
                server._stopping.wait(step.get("seconds"))
                self.close_connection = True
            elif body.get("stream"):
                if server.options.get("no_usage"):
                    step = {**step, "report_usage": False}
                self._stream(step, body)
            else:
                self._send_json(200, _completion(step, body))

        def _refuse_context(
            self, body: dict[str, Any], tokens: int, window: int, style: str
        ) -> None:
            if style == "llama_cpp" and body.get("stream"):
                # llama-cpp-python's server: the exception is raised inside the stream's
                # generator, after the 200; the client gets an empty stream.
                self._empty_stream(True)
                return
            status, payload = CONTEXT_ERRORS[style](tokens, window)
            self._send_json(status, payload)

        def _empty_stream(self, done: bool) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            if done:
                data = b"data: [DONE]\n\n"
                self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()

        def _stream(self, step: dict[str, Any], body: dict[str, Any]) -> None:
            # Chunked and kept alive, as the real APIs answer: the next request reuses the
            # connection (a dropped or abandoned stream closes it).
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()

            def chunk(data: bytes) -> None:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                self.wfile.flush()

            delay = float(step.get("delay") or 0.0)
            hold_after = step.get("hold_after")
            if hold_after is not None:
                server._released.clear()
            try:
                first = True
                for event in _stream_events(step, body):
                    if event is HOLD:
                        server._released.wait()
                        continue
                    if event is None:  # simulate a dropped connection
                        self.close_connection = True
                        self.wfile.flush()
                        self.connection.shutdown(socket.SHUT_RDWR)
                        return
                    if delay and not first and server._stopping.wait(delay):
                        self.close_connection = True
                        return
                    first = False
                    chunk(f"data: {json.dumps(event)}\n\n".encode())
                chunk(b"data: [DONE]\n\n")
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError, OSError):
                self.close_connection = True  # the client went away (a stop, a timeout)

        def _control(self, body: Any) -> None:
            if self.path == "/_control/script" and isinstance(body, list):
                for step in body:
                    server._enqueue(step)
                self._send_json(200, {"queued": len(body)})
            elif self.path == "/_control/reset":
                server.reset()
                self._send_json(200, {"reset": True})
            elif self.path == "/_control/options" and isinstance(body, dict):
                for name, value in body.items():
                    server._set_option(name, value)
                self._send_json(200, {"options": server.options})
            elif self.path == "/_control/default" and isinstance(body, dict):
                server.default_reply = str(body.get("text", DEFAULT_REPLY))
                self._send_json(200, {"default": server.default_reply})
            else:
                self._send_json(404, {"error": {"message": "unknown control"}})

    return Handler


# --- scripting a server in another process ------------------------------------------------------


@dataclass
class RemoteModelServer(_Scripting):
    """Scripts a fake model server running as a subprocess (``python -m tests.support.model_server``)."""

    base_url: str  # http://127.0.0.1:PORT/v1
    _root: str = field(init=False)

    def __post_init__(self) -> None:
        self._root = self.base_url.rsplit("/v1", 1)[0]

    def _post(self, path: str, payload: Any) -> Any:
        req = urllib.request.Request(
            self._root + path,
            data=json.dumps(payload).encode(),
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        with urllib.request.urlopen(req, timeout=10) as resp:
            return json.loads(resp.read())

    def _enqueue(self, step: dict[str, Any]) -> None:
        self._post("/_control/script", [step])

    def _set_option(self, name: str, value: Any) -> None:
        self._post("/_control/options", {name: value})

    def reset(self) -> None:
        self._post("/_control/reset", {})

    def set_default_reply(self, text: str) -> None:
        self._post("/_control/default", {"text": text})

    @property
    def requests(self) -> list[RecordedRequest]:
        with urllib.request.urlopen(self._root + "/_control/requests", timeout=10) as resp:
            return [RecordedRequest(**item) for item in json.loads(resp.read())]


# --- pytest fixture -----------------------------------------------------------------------------


@pytest.fixture
def model_server() -> Iterator[FakeModelServer]:
    """A started fake model server for this test; ``.base_url`` goes into a profile."""
    server = FakeModelServer().start()
    try:
        yield server
    finally:
        server.stop()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Fake OpenAI-compatible model server")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args(argv)
    server = FakeModelServer(args.host, args.port)
    print(f"READY {server.base_url}", flush=True)
    try:
        server._httpd.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server._httpd.server_close()


if __name__ == "__main__":
    main(sys.argv[1:])
