"""A run's events as OpenAI's answer objects.

The run's ``delta`` events are the answer's text (every step's, in order — the text a client
sees is the text chatmem stores); ``reasoning`` events, a reasoning model's thinking, are
``reasoning_content`` (as DeepSeek's API and llama.cpp's server name it); ``tool_call``
events marked ``client`` are the calls handed back; ``done`` carries the usage the provider billed for the turn's model calls (counted
where it reported none, PROV-1); ``error`` ends the run failed.  Other events (compaction,
server-side tool calls and results, approvals) are chatmem's business and not shown.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from chatmem.turns.events import Delta, Done, Error, Reasoning, RunEvent, ToolCall


def shown(event: RunEvent) -> bool:
    """Whether the event reaches an OpenAI client: the answer's text and thinking, the
    calls handed back to the client, the run's end."""
    match event:
        case Delta() | Reasoning() | Done() | Error():
            return True
        case ToolCall(client=client):
            return client
    return False


def tool_call_object(call: ToolCall, index: int | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": call.id,
        "type": "function",
        "function": {"name": call.name, "arguments": call.arguments or "{}"},
    }
    return body if index is None else {"index": index, **body}


def usage_object(done: Done | None) -> dict[str, Any]:
    """OpenAI's ``usage``; ``prompt_tokens_details.cached_tokens`` and
    ``completion_tokens_details.reasoning_tokens`` when the provider reported them (the run's
    ``done`` carries them as ``cached_tokens`` and ``reasoning_tokens``)."""
    tally = (done.usage if done is not None else None) or {}
    prompt, completion = int(tally.get("prompt_tokens", 0)), int(tally.get("completion_tokens", 0))
    usage: dict[str, Any] = {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }
    if "cached_tokens" in tally:
        usage["prompt_tokens_details"] = {"cached_tokens": int(tally["cached_tokens"])}
    if "reasoning_tokens" in tally:
        usage["completion_tokens_details"] = {"reasoning_tokens": int(tally["reasoning_tokens"])}
    return usage


@dataclass
class Answer:
    """The answer being assembled (non-streaming), or the stream's running state."""

    run_id: str
    model: str
    created: int = field(default_factory=lambda: int(time.time()))
    text: list[str] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)
    calls: list[ToolCall] = field(default_factory=list)
    done: Done | None = None
    error: Error | None = None

    @property
    def id(self) -> str:
        return f"chatcmpl-{self.run_id}"

    @property
    def finish_reason(self) -> str:
        """``tool_calls``; else why the last answer ended when it was cut (``length``: the
        model's output limit; ``content_filter``), as the provider said; else ``stop``."""
        if self.calls:
            return "tool_calls"
        return str((self.done.finish_reason if self.done is not None else None) or "stop")

    def take(self, event: RunEvent) -> None:
        match event:
            case Delta(text=text):
                self.text.append(text)
            case Reasoning(text=text):
                self.reasoning.append(text)
            case ToolCall():
                self.calls.append(event)
            case Done():
                self.done = event
            case Error():
                self.error = event

    def completion(self) -> dict[str, Any]:
        """The ``chat.completion`` object."""
        text = "".join(self.text)
        message: dict[str, Any] = {
            "role": "assistant",
            "content": text if text or not self.calls else None,
            "refusal": None,
        }
        if self.reasoning:
            message["reasoning_content"] = "".join(self.reasoning)
        if self.calls:
            message["tool_calls"] = [tool_call_object(c) for c in self.calls]
        return {
            "id": self.id,
            "object": "chat.completion",
            "created": self.created,
            "model": self.model,
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": self.finish_reason,
                    "logprobs": None,
                }
            ],
            "usage": usage_object(self.done),
        }

    def chunk(
        self,
        delta: dict[str, Any] | None,
        finish_reason: str | None = None,
        usage: dict[str, Any] | None = None,
    ) -> str:
        """One ``chat.completion.chunk`` as an SSE frame (``delta`` None: the usage chunk,
        which has no choices)."""
        body: dict[str, Any] = {
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": []
            if delta is None
            else [{"index": 0, "delta": delta, "finish_reason": finish_reason, "logprobs": None}],
        }
        if usage is not None:
            body["usage"] = usage
        return f"data: {json.dumps(body, ensure_ascii=False, separators=(',', ':'))}\n\n"

    def frames(self, event: RunEvent, *, include_usage: bool) -> str:
        """The SSE frames for one shown event (the stream's end after ``done``)."""
        self.take(event)
        match event:
            case Delta(text=text):
                return self.chunk({"content": text})
            case Reasoning(text=text):
                return self.chunk({"reasoning_content": text})
            case ToolCall():
                index = len(self.calls) - 1
                return self.chunk({"tool_calls": [tool_call_object(event, index)]})
            case Error(code=code, message=message):
                error = {"message": message, "code": code, "type": "api_error"}
                return f"data: {json.dumps({'error': error}, ensure_ascii=False)}\n\n"
        frames = self.chunk({}, self.finish_reason)
        if include_usage:
            frames += self.chunk(None, usage=usage_object(self.done))
        return frames + "data: [DONE]\n\n"


async def first_shown(events: AsyncIterator[RunEvent]) -> RunEvent | None:
    """The run's first event a client sees (None: the run ended without one)."""
    async for event in events:
        if shown(event):
            return event
    return None
