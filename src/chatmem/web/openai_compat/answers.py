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

from chatmem.turns.events import RunEvent

#: The events that reach an OpenAI client.
SHOWN = frozenset({"delta", "reasoning", "tool_call", "done", "error"})


def shown(event: RunEvent) -> bool:
    return event.type in SHOWN and (event.type != "tool_call" or bool(event.data.get("client")))


def tool_call_object(data: dict[str, Any], index: int | None = None) -> dict[str, Any]:
    call: dict[str, Any] = {
        "id": data["id"],
        "type": "function",
        "function": {"name": data["name"], "arguments": data.get("arguments") or "{}"},
    }
    return call if index is None else {"index": index, **call}


def usage_object(done: dict[str, Any]) -> dict[str, int]:
    tally = done.get("usage") or {}
    prompt, completion = int(tally.get("prompt_tokens", 0)), int(tally.get("completion_tokens", 0))
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


@dataclass
class Answer:
    """The answer being assembled (non-streaming), or the stream's running state."""

    run_id: str
    model: str
    created: int = field(default_factory=lambda: int(time.time()))
    text: list[str] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)
    calls: list[dict[str, Any]] = field(default_factory=list)
    done: dict[str, Any] | None = None
    error: dict[str, Any] | None = None

    @property
    def id(self) -> str:
        return f"chatcmpl-{self.run_id}"

    @property
    def finish_reason(self) -> str:
        """``tool_calls``; else why the last answer ended when it was cut (``length``: the
        model's output limit; ``content_filter``), as the provider said; else ``stop``."""
        if self.calls:
            return "tool_calls"
        return str((self.done or {}).get("finish_reason") or "stop")

    def take(self, event: RunEvent) -> None:
        if event.type == "delta":
            self.text.append(str(event.data.get("text", "")))
        elif event.type == "reasoning":
            self.reasoning.append(str(event.data.get("text", "")))
        elif event.type == "tool_call":
            self.calls.append(event.data)
        elif event.type == "done":
            self.done = event.data
        elif event.type == "error":
            self.error = event.data

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
            "usage": usage_object(self.done or {}),
        }

    def chunk(
        self,
        delta: dict[str, Any] | None,
        finish_reason: str | None = None,
        usage: dict[str, int] | None = None,
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
        if event.type == "delta":
            return self.chunk({"content": event.data.get("text", "")})
        if event.type == "reasoning":
            return self.chunk({"reasoning_content": event.data.get("text", "")})
        if event.type == "tool_call":
            index = len(self.calls) - 1
            return self.chunk({"tool_calls": [tool_call_object(event.data, index)]})
        if event.type == "error":
            error = {"message": event.data.get("message", ""), "code": event.data.get("code")}
            body = json.dumps({"error": {**error, "type": "api_error"}}, ensure_ascii=False)
            return f"data: {body}\n\n"
        frames = self.chunk({}, self.finish_reason)
        if include_usage:
            frames += self.chunk(None, usage=usage_object(self.done or {}))
        return frames + "data: [DONE]\n\n"


async def first_shown(events: AsyncIterator[RunEvent]) -> RunEvent | None:
    """The run's first event a client sees (None: the run ended without one)."""
    async for event in events:
        if shown(event):
            return event
    return None
