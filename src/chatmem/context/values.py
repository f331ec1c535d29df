"""Frozen values the engine takes and gives.  Compared by content; ids are opaque strings.

These are the engine's whole public vocabulary.  Storage ids, rows and sessions are a storage
concern: the store builds these values from rows (with cached token counts) and hands them in.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

Role = Literal["user", "assistant", "system", "tool"]
Mode = Literal["off", "economy", "full", "window"]
FileState = Literal["auto", "pinned", "excluded"]
MessageStatus = Literal["in_memory", "summarized", "excluded", "out_of_memory"]
FileStatus = Literal["in_memory", "out_of_memory", "pinned", "excluded"]
Level = Literal["muted", "light", "red"]

MODES: tuple[Mode, ...] = ("off", "economy", "full", "window")


@dataclass(frozen=True)
class ToolCall:
    """A tool call requested by an assistant message (OpenAI shape, arguments as JSON text)."""

    id: str
    name: str
    arguments: str = "{}"


@dataclass(frozen=True)
class Message:
    """One stored message.

    ``tokens`` is the cached count of this message under the profile's tokenizer, including the
    per-message overhead (CTX-2).  ``None`` means "not counted yet": the engine then counts it
    (the offline CLI path); the server always passes cached counts so planning never
    re-tokenizes history.
    """

    id: str
    role: Role
    content: str
    tokens: int | None = None
    excluded: bool = False
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None


@dataclass(frozen=True)
class Summary:
    """CTX-9: a summary of every message up to and including ``through`` (a message id)."""

    text: str
    through: str
    version: int = 1
    focus: str | None = None
    tokens: int | None = None


@dataclass(frozen=True)
class File:
    """CTX-16: a file attached to the conversation, optionally to one of its messages."""

    id: str
    name: str
    content: str
    message_id: str | None = None
    state: FileState = "auto"
    tokens: int | None = None


@dataclass(frozen=True)
class Prices:
    """USD per million tokens.  ``free`` models cost nothing and say so (CTX-17, CTX-18)."""

    input_per_mtok: float = 0.0
    output_per_mtok: float = 0.0
    free: bool = False


@dataclass(frozen=True)
class Profile:
    """What the engine needs to know about the model (PROF-1) and the memory policy knobs."""

    context_window: int = 32_768
    answer_reserve: int = 4_096
    tokenizer: str = "estimate"
    stateless: bool = False
    model: str | None = None
    prices: Prices | None = None  # None: look up ``model`` in genai-prices, else free
    summarizer_prices: Prices | None = None  # None: same as ``prices``
    economy_pairs: int = 3  # K (CTX-4)
    economy_batch: int = 4  # B (CTX-4)
    full_keep_last: int = 20  # CTX-5
    window_messages: int = 12  # N (CTX-6)
    window_chars: int = 8_000  # C (CTX-6)


@dataclass(frozen=True)
class Conversation:
    """Everything the engine plans over.  ``messages`` is oldest first and may be long: the
    engine only walks the tail it needs (plan cost grows with the window, not the history)."""

    messages: Sequence[Message]
    summary: Summary | None = None
    files: Sequence[File] = ()
    instructions: str = ""
    tools: Sequence[Mapping[str, Any]] = field(default_factory=tuple)  # OpenAI tool schemas
