"""Run events: the numbered, typed records a turn emits (TURN-6).

A run's events are numbered from 1 by the one task that runs it, so a sequence number is a
cursor: a client that saw event ``n`` resumes with ``Last-Event-ID: n``.  The same value is
published live through the coordinator and stored with the run (``run_events``).

:data:`RunEvent` is a closed union: one frozen dataclass per event type, ``seq`` its first
field.  This module alone knows their wire form — an event's ``type`` string and its ``data``
object, the same keys in the same order whether stored (``run_events``), published
(:func:`to_json`) or streamed (:func:`sse`) — and reads it back (:func:`from_stored`,
:func:`from_json`).  Producers build the dataclasses (the journal numbers them: a producer
hands it the class and the fields after ``seq``); consumers match on the classes.  A key
that is sent only when it says something (``client``, ``files``, a compaction's ``piece`` …)
is a field with a default the wire form leaves out.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Concatenate, ParamSpec, Protocol, TypeAlias, TypeVar

P = ParamSpec("P")


@dataclass(frozen=True, slots=True)
class Delta:
    """A piece of the answer's text, as the model streamed it; ``step``: which model request
    of the turn (a turn with tool calls makes several)."""

    seq: int
    text: str
    step: int
    type: ClassVar[str] = "delta"
    terminal: ClassVar[bool] = False

    @property
    def data(self) -> dict[str, Any]:
        return {"text": self.text, "step": self.step}


@dataclass(frozen=True, slots=True)
class Reasoning:
    """A piece of a reasoning model's thinking (shown, kept beside the answer, never sent
    back to the model)."""

    seq: int
    text: str
    step: int
    type: ClassVar[str] = "reasoning"
    terminal: ClassVar[bool] = False

    @property
    def data(self) -> dict[str, Any]:
        return {"text": self.text, "step": self.step}


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A tool call the model asked for, shown before it is made; ``client``: one of the
    client's own tools, handed back and not made (``server`` None then).  APPS-1:
    ``tool_call_id`` is the call's record (None for a client's tool), ``app`` its app
    (``{"resource_uri"}``) when the tool has one and its server shows apps."""

    seq: int
    id: str
    name: str
    arguments: str
    message_id: str | None
    server: str | None
    client: bool = False
    tool_call_id: str | None = None
    app: dict[str, Any] | None = None
    type: ClassVar[str] = "tool_call"
    terminal: ClassVar[bool] = False

    @property
    def data(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "id": self.id,
            "name": self.name,
            "arguments": self.arguments,
            "message_id": self.message_id,
            "server": self.server,
            "tool_call_id": self.tool_call_id,
            "app": self.app,
        }
        if self.client:
            data["client"] = True
        return data


@dataclass(frozen=True, slots=True)
class Approval:
    """PROV-6: an "ask first" call waiting for the user (``status`` ``waiting``), then the
    answer (``approved``, ``refused``, ``expired``)."""

    seq: int
    tool_call_id: str
    name: str
    arguments: str
    server: str | None
    tool: str | None
    status: str
    type: ClassVar[str] = "approval"
    terminal: ClassVar[bool] = False

    @property
    def data(self) -> dict[str, Any]:
        return {
            "tool_call_id": self.tool_call_id,
            "name": self.name,
            "arguments": self.arguments,
            "server": self.server,
            "tool": self.tool,
            "status": self.status,
        }


@dataclass(frozen=True, slots=True)
class ToolResult:
    """A call's result as stored in its tool message (``files``: its attachments, PROV-4),
    with the call's record and app as in :class:`ToolCall` (APPS-1)."""

    seq: int
    id: str
    name: str
    content: str
    status: str
    message_id: str | None
    files: tuple[dict[str, Any], ...] = ()
    tool_call_id: str | None = None
    app: dict[str, Any] | None = None
    type: ClassVar[str] = "tool_result"
    terminal: ClassVar[bool] = False

    @property
    def data(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "id": self.id,
            "name": self.name,
            "content": self.content,
            "status": self.status,
            "message_id": self.message_id,
            "tool_call_id": self.tool_call_id,
            "app": self.app,
        }
        if self.files:
            data["files"] = list(self.files)
        return data


@dataclass(frozen=True, slots=True)
class Compaction:
    """A fold's progress (``final`` false: round ``round`` of about ``rounds``, ``piece`` of a
    long message) and its end (``final``, with what it ``cost``); the summary stored last
    once there is one (``summary_id``, ``summary_version``, ``through``)."""

    seq: int
    message: str
    count: int
    total: int
    round: int
    rounds: int
    final: bool
    piece: tuple[int, int] | None = None
    summary_id: str | None = None
    summary_version: int | None = None
    through: str | None = None
    cost: float | None = None
    type: ClassVar[str] = "compaction"
    terminal: ClassVar[bool] = False

    @property
    def data(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "message": self.message,
            "count": self.count,
            "total": self.total,
            "round": self.round,
            "rounds": self.rounds,
            "final": self.final,
        }
        if self.piece is not None:
            data["piece"] = list(self.piece)
        if self.summary_id is not None:
            data["summary_id"] = self.summary_id
            data["summary_version"] = self.summary_version
            data["through"] = self.through
        if self.cost is not None:
            data["cost"] = self.cost
        return data


@dataclass(frozen=True, slots=True)
class Done:
    """The run ended (``status`` ``completed`` or ``stopped``): the last message, the usage
    and cost of the turn's model calls, who answered (USE-4), and why the last answer was
    cut (``length``, ``content_filter``) or None."""

    seq: int
    status: str
    message_id: str | None
    note: str | None
    usage: dict[str, int]
    cost: float
    answered_by: dict[str, Any] | None
    finish_reason: str | None
    type: ClassVar[str] = "done"
    terminal: ClassVar[bool] = True

    @property
    def data(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "message_id": self.message_id,
            "note": self.note,
            "usage": self.usage,
            "cost": self.cost,
            "answered_by": self.answered_by,
            "finish_reason": self.finish_reason,
        }


@dataclass(frozen=True, slots=True)
class Error:
    """The run ended failed or ``interrupted`` (recovery), with chatmem's error code."""

    seq: int
    code: str
    message: str
    type: ClassVar[str] = "error"
    terminal: ClassVar[bool] = True

    @property
    def data(self) -> dict[str, Any]:
        return {"code": self.code, "message": self.message}


RunEvent: TypeAlias = (
    Delta | Reasoning | ToolCall | Approval | ToolResult | Compaction | Done | Error
)
E = TypeVar("E", bound=RunEvent)


class Emit(Protocol):
    """How a producer emits an event: the event's class (or a function building it from its
    number) and the fields after ``seq`` — :meth:`EventJournal.emit`."""

    def __call__(
        self, kind: Callable[Concatenate[int, P], E], /, *args: P.args, **kwargs: P.kwargs
    ) -> Awaitable[E]: ...


def from_stored(seq: int, type_: str, data: Mapping[str, Any]) -> RunEvent:
    """The event of a stored row (or a published one); a key a row lacks takes its default
    (raises ``ValueError`` for a type that is not a run event's)."""
    get = data.get
    match type_:
        case "delta":
            return Delta(seq, str(get("text", "")), int(get("step", 0)))
        case "reasoning":
            return Reasoning(seq, str(get("text", "")), int(get("step", 0)))
        case "tool_call":
            return ToolCall(
                seq,
                data["id"],
                data["name"],
                get("arguments", "{}"),
                get("message_id"),
                get("server"),
                bool(get("client")),
                get("tool_call_id"),
                get("app"),
            )
        case "approval":
            return Approval(
                seq,
                data["tool_call_id"],
                data["name"],
                get("arguments", "{}"),
                get("server"),
                get("tool"),
                data["status"],
            )
        case "tool_result":
            return ToolResult(
                seq,
                data["id"],
                data["name"],
                get("content", ""),
                get("status", ""),
                get("message_id"),
                tuple(get("files") or ()),
                get("tool_call_id"),
                get("app"),
            )
        case "compaction":
            piece = get("piece")
            return Compaction(
                seq,
                get("message", ""),
                get("count", 0),
                get("total", 0),
                get("round", 0),
                get("rounds", 0),
                bool(get("final")),
                (piece[0], piece[1]) if piece is not None else None,
                get("summary_id"),
                get("summary_version"),
                get("through"),
                get("cost"),
            )
        case "done":
            return Done(
                seq,
                get("status", "completed"),
                get("message_id"),
                get("note"),
                get("usage") or {},
                get("cost", 0.0),
                get("answered_by"),
                get("finish_reason"),
            )
        case "error":
            return Error(seq, str(get("code", "")), str(get("message", "")))
    raise ValueError(f"not a run event type: {type_!r}")


def to_json(event: RunEvent) -> str:
    """The event as the coordinator's live log carries it (:func:`from_json` reads it)."""
    return json.dumps(
        {"seq": event.seq, "type": event.type, "data": event.data}, ensure_ascii=False
    )


def from_json(text: str | bytes) -> RunEvent:
    raw = json.loads(text)
    return from_stored(int(raw["seq"]), str(raw["type"]), raw["data"])


def sse(event: RunEvent) -> str:
    """The event as one Server-Sent Events frame (``id`` = sequence number)."""
    payload = json.dumps(event.data, ensure_ascii=False, separators=(",", ":"))
    return f"id: {event.seq}\nevent: {event.type}\ndata: {payload}\n\n"
