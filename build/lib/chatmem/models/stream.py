"""A Chat Completions answer as it streams (PROF-5, PROV-1, PROV-2, PROV-5): events, parsed.

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

:func:`parse_stream` reads the SSE body: ``data:`` lines joined into one chunk until a blank
line, ``[DONE]`` ends it (the rest of the body is drained for :data:`DRAIN_SECONDS` so the
connection goes back to the pool).  An error object mid-stream is the provider's error (a
context-length one recognised, :mod:`chatmem.models.refusals`); a stream with nothing in it
is ``ProviderEmptyStream``; one that ends before ``[DONE]`` or a finish reason is a
``ProviderError``.  ``limit`` bounds the answer's UTF-8 bytes (reasoning, text and tool-call
arguments): past it the text up to the bound is yielded and ``AnswerTooLarge`` raised, and a
single line is bounded too (:func:`_bounded_lines`).
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio
import httpx

from chatmem.context.values import ToolCall
from chatmem.errors import AnswerTooLarge, ProviderEmptyStream, ProviderError
from chatmem.models.refusals import context_error, error_from_payload, is_context_length

#: How long the end of a stream is awaited after ``[DONE]`` to keep the connection.
DRAIN_SECONDS = 0.5
#: A single SSE line may hold this many characters per byte of the answer bound (JSON escapes
#: a character as up to six), plus room for the chunk's envelope.
_LINE_CHARS_PER_BYTE = 6
_LINE_SLACK = 64 * 1024


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
    #: ``prompt_tokens_details.cached_tokens`` and ``completion_tokens_details.
    #: reasoning_tokens`` when the provider reported them (None: it did not say).
    cached_tokens: int | None = None
    reasoning_tokens: int | None = None


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


def usage_of(payload: Any) -> Usage | None:
    """The ``usage`` a chunk or a whole answer reported, if any."""
    usage = payload.get("usage") if isinstance(payload, dict) else None
    if not isinstance(usage, dict):
        return None
    return Usage(
        _count(usage.get("prompt_tokens")) or 0,
        _count(usage.get("completion_tokens")) or 0,
        _detail(usage, "prompt_tokens_details", "cached_tokens"),
        _detail(usage, "completion_tokens_details", "reasoning_tokens"),
    )


def _count(value: Any) -> int | None:
    """A token count as reported (None: absent, or not a count)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        return None
    return int(value)


def _detail(usage: Mapping[str, Any], group: str, key: str) -> int | None:
    details = usage.get(group)
    return _count(details.get(key)) if isinstance(details, dict) else None


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


async def parse_stream(
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
                message, code = error_from_payload(chunk)
                message = scrub(message)
                if is_context_length(400, message, code):
                    raise context_error(message, chunk)
                raise ProviderError(f"The model API failed mid-answer: {message}")
            if isinstance(chunk.get("usage"), dict):
                usage = usage_of(chunk)
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
