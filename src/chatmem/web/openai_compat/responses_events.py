"""A run's events as a Responses API ``response`` object and its stream (API-3).

One :class:`ResponseBuilder` serves both: it takes the run's events in order and answers,
for each, the stream events OpenAI sends for it (``response.output_item.added``,
``response.output_text.delta`` …, each with its ``sequence_number``); its state is the
``response`` object the non-streaming answer, ``response.completed`` and ``GET
/v1/responses/{id}`` show.  Output items, in the order they began:

* ``reasoning`` — a reasoning model's thinking (``reasoning_text`` content);
* ``message`` — the answer's text (``output_text``), one item until another item comes
  between (a turn's server-side tool calls are chatmem's business and not shown);
* ``function_call`` — a call of one of the client's tools, handed back (the turn ends).

The end: ``done`` → ``completed`` (``incomplete`` when the provider cut the answer at the
output limit or a filter; ``cancelled`` when it was stopped), ``error`` → ``failed``.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

from chatmem.turns.events import Delta, Done, Error, Reasoning, RunEvent, ToolCall
from chatmem.web.openai_compat.answers import shown

Frame = dict[str, Any]


def response_id(run_id: str) -> str:
    return f"resp_{run_id}"


def run_id_of(response: str) -> str | None:
    """The run a response id names (None: not one of chatmem's)."""
    run = response.removeprefix("resp_")
    return run if run != response and run else None


def usage_object(done: Done | None) -> dict[str, Any]:
    tally = (done.usage if done is not None else None) or {}
    prompt, completion = int(tally.get("prompt_tokens", 0)), int(tally.get("completion_tokens", 0))
    return {
        "input_tokens": prompt,
        "input_tokens_details": {"cached_tokens": int(tally.get("cached_tokens", 0) or 0)},
        "output_tokens": completion,
        "output_tokens_details": {"reasoning_tokens": int(tally.get("reasoning_tokens", 0) or 0)},
        "total_tokens": prompt + completion,
    }


@dataclass
class ResponseBuilder:
    run_id: str
    model: str
    #: The request's fields the object echoes (``ResponsesRequest.echo``).
    echo: dict[str, Any]
    #: None for ``store: false`` (nothing stored, no conversation).
    conversation_id: str | None
    previous_response_id: str | None = None
    created_at: float = field(default_factory=time.time)
    status: str = "in_progress"
    output: list[dict[str, Any]] = field(default_factory=list)
    done: Done | None = None
    error: Error | None = None
    seq: int = 0
    #: The output index of the item text and thinking go on (None: the next starts one).
    _open: int | None = None

    # -- the object --------------------------------------------------------------------
    @property
    def id(self) -> str:
        return response_id(self.run_id)

    def obj(self) -> dict[str, Any]:
        """The ``response`` object as it now is."""
        echo = self.echo
        incomplete = None
        if self.status == "incomplete" and self.done is not None:
            why = self.done.finish_reason
            incomplete = {
                "reason": "content_filter" if why == "content_filter" else "max_output_tokens"
            }
        error = None
        if self.error is not None:
            error = {"code": self.error.code, "message": self.error.message}
        return {
            "id": self.id,
            "object": "response",
            "created_at": int(self.created_at),
            "status": self.status,
            "error": error,
            "incomplete_details": incomplete,
            "instructions": echo.get("instructions"),
            "max_output_tokens": echo.get("max_output_tokens"),
            "model": self.model,
            "output": [dict(item) for item in self.output],
            "parallel_tool_calls": echo.get("parallel_tool_calls", True),
            "previous_response_id": self.previous_response_id,
            "conversation": {"id": self.conversation_id} if self.conversation_id else None,
            "reasoning": echo.get("reasoning"),
            "store": echo.get("store", True),
            "temperature": echo.get("temperature"),
            "text": echo.get("text") or {"format": {"type": "text"}},
            "tool_choice": echo.get("tool_choice", "auto"),
            "tools": echo.get("tools", []),
            "top_p": echo.get("top_p"),
            "truncation": "disabled",
            "usage": usage_object(self.done) if self.status != "in_progress" else None,
            "metadata": echo.get("metadata") or {},
            "user": None,
        }

    def take_all(self, events: list[RunEvent]) -> None:
        for event in events:
            self.frames(event)

    # -- the stream ------------------------------------------------------------------
    def frame(self, kind: str, **body: Any) -> Frame:
        frame = {"type": kind, **body, "sequence_number": self.seq}
        self.seq += 1
        return frame

    def opening(self) -> list[Frame]:
        return [
            self.frame("response.created", response=self.obj()),
            self.frame("response.in_progress", response=self.obj()),
        ]

    def frames(self, event: RunEvent) -> list[Frame]:
        """The stream events for one run event (none for what a client is not shown)."""
        if not shown(event):
            return []
        match event:
            case Delta(text=text):
                return self._text(text)
            case Reasoning(text=text):
                return self._thinking(text)
            case ToolCall():
                return self._call(event)
            case Done():
                self.done = event
                self.status = _status(event)
                return [*self._close(), self.frame(_END[self.status], response=self.obj())]
            case Error():
                self.error, self.status = event, "failed"
                return [*self._close(), self.frame("response.failed", response=self.obj())]
        return []

    def _item(self, kind: str) -> list[Frame]:
        """The open item if it is a ``kind``; else closes it and opens a new one."""
        if self._open is not None and self.output[self._open]["type"] == kind:
            return []
        frames = self._close()
        index = len(self.output)
        if kind == "message":
            item: dict[str, Any] = {
                "id": f"msg_{self.run_id}_{index}",
                "type": "message",
                "status": "in_progress",
                "role": "assistant",
                "content": [],
            }
            part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
        else:
            item = {
                "id": f"rs_{self.run_id}_{index}",
                "type": "reasoning",
                "status": "in_progress",
                "summary": [],
                "content": [],
            }
            part = {"type": "reasoning_text", "text": ""}
        self.output.append(item)
        self._open = index
        frames.append(
            self.frame("response.output_item.added", output_index=index, item=_copy(item))
        )
        item["content"].append(part)
        frames.append(
            self.frame(
                "response.content_part.added",
                item_id=item["id"],
                output_index=index,
                content_index=0,
                part=dict(part),
            )
        )
        return frames

    def _text(self, text: str) -> list[Frame]:
        return self._delta("message", "response.output_text.delta", text, logprobs=[])

    def _thinking(self, text: str) -> list[Frame]:
        return self._delta("reasoning", "response.reasoning_text.delta", text)

    def _delta(self, kind: str, event: str, text: str, **extra: Any) -> list[Frame]:
        """``text`` appended to the open item of ``kind`` (opened first if need be)."""
        frames = self._item(kind)
        index = self._open
        assert index is not None
        item = self.output[index]
        item["content"][0]["text"] += text
        frames.append(
            self.frame(
                event, item_id=item["id"], output_index=index, content_index=0, delta=text, **extra
            )
        )
        return frames

    def _call(self, call: ToolCall) -> list[Frame]:
        frames = self._close()
        index = len(self.output)
        arguments = call.arguments or "{}"
        item: dict[str, Any] = {
            "id": f"fc_{self.run_id}_{index}",
            "type": "function_call",
            "status": "in_progress",
            "call_id": call.id,
            "name": call.name,
            "arguments": "",
        }
        self.output.append(item)
        frames.append(
            self.frame("response.output_item.added", output_index=index, item=_copy(item))
        )
        ids = {"item_id": item["id"], "output_index": index}
        frames.append(self.frame("response.function_call_arguments.delta", **ids, delta=arguments))
        item["arguments"], item["status"] = arguments, "completed"
        frames.append(
            self.frame(
                "response.function_call_arguments.done", **ids, arguments=arguments, name=call.name
            )
        )
        frames.append(self.frame("response.output_item.done", output_index=index, item=_copy(item)))
        return frames

    def _close(self) -> list[Frame]:
        """Ends the open text or thinking item (its ``.done`` events)."""
        if self._open is None:
            return []
        index, self._open = self._open, None
        item = self.output[index]
        part = item["content"][0]
        ids = {"item_id": item["id"], "output_index": index, "content_index": 0}
        frames: list[Frame] = []
        if item["type"] == "message":
            frames.append(
                self.frame("response.output_text.done", **ids, text=part["text"], logprobs=[])
            )
        else:
            frames.append(self.frame("response.reasoning_text.done", **ids, text=part["text"]))
        frames.append(self.frame("response.content_part.done", **ids, part=dict(part)))
        item["status"] = "incomplete" if self.status in ("failed", "incomplete") else "completed"
        frames.append(self.frame("response.output_item.done", output_index=index, item=_copy(item)))
        return frames


_END = {
    "completed": "response.completed",
    "incomplete": "response.incomplete",
    "cancelled": "response.completed",
}


def _status(done: Done) -> str:
    if done.status == "stopped":
        return "cancelled"
    if done.finish_reason in ("length", "content_filter"):
        return "incomplete"
    return "completed"


def _copy(item: dict[str, Any]) -> dict[str, Any]:
    copied: dict[str, Any] = json.loads(json.dumps(item))
    return copied


def sse(frame: Frame) -> str:
    body = json.dumps(frame, ensure_ascii=False, separators=(",", ":"))
    return f"event: {frame['type']}\ndata: {body}\n\n"
