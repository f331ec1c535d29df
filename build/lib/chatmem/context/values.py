"""Frozen values the engine takes and gives.  Compared by content; ids are opaque strings.

These are the engine's whole public vocabulary.  Storage ids, rows and sessions are a storage
concern: the store builds these values from rows (with cached token counts) and hands them in.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from chatmem.context import policy
from chatmem.context.facts import FactKind

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
    #: When it was written (the fact guard dates the facts it keeps, CTX-24); None: unknown.
    at: datetime | None = None


@dataclass(frozen=True)
class Fact:
    """CTX-24: a hard fact of a stored message, as the fact guard keeps or drops it."""

    text: str
    kind: FactKind
    message_id: str
    role: str
    at: datetime | None = None
    #: How many times the conversation stated it (the cap keeps the more repeated first).
    repeats: int = 1


@dataclass(frozen=True)
class Summary:
    """CTX-9: a summary of every message up to and including ``through`` (a message id).
    ``through`` None: a summary carried into a new conversation (CTX-23) that covers none of
    its messages."""

    text: str
    through: str | None
    version: int = 1
    focus: str | None = None
    tokens: int | None = None
    #: CTX-24: the facts its kept section holds, and those the cap left out (listed, and
    #: how many in all); they carry over into the next summary's round.
    kept: tuple[Fact, ...] = ()
    dropped: tuple[Fact, ...] = ()
    dropped_count: int = 0
    #: The facts of the messages it covers that its own words hold (checked again next round).
    held: tuple[Fact, ...] = ()


@dataclass(frozen=True)
class File:
    """CTX-16: a file attached to the conversation, optionally to one of its messages.

    ``mime`` set: a binary attachment (PROV-4, PROJ-2: an image a tool returned…) whose bytes
    the engine never sees; a placeholder in its message stands for it, and the file itself is
    never sent (``out_of_memory`` unless excluded)."""

    id: str
    name: str
    content: str
    message_id: str | None = None
    state: FileState = "auto"
    tokens: int | None = None
    mime: str | None = None
    #: PROJ-2: an image's size in pixels (read from its bytes when stored).
    width: int | None = None
    height: int | None = None

    @property
    def binary(self) -> bool:
        return self.mime is not None

    @property
    def image(self) -> bool:
        """An attached image (PROJ-2; ``chatmem.context.images``): binary, with its size."""
        return self.mime is not None and self.width is not None and self.height is not None


@dataclass(frozen=True)
class AppContext:
    """APPS-3: what an MCP App asked the model to know (``ui/update-model-context``), as the
    text sent (naming the app's tool) and its cached count, per-message overhead included
    (CTX-2: counted when stored, never here).  ``tokens`` None: count it (the offline path)."""

    text: str
    tokens: int | None = None


@dataclass(frozen=True)
class PinnedFacts:
    """CTX-24: the facts the user pinned ("Remember always"), as the one message sent for
    them (:func:`chatmem.context.pinned_facts.render_pinned_facts`) and its cached count,
    per-message overhead included (CTX-2: counted when they change, never here).  ``tokens``
    None: count it (the offline path)."""

    text: str
    tokens: int | None = None


@dataclass(frozen=True)
class Prices:
    """USD per million tokens.  ``free`` models cost nothing and say so (CTX-17, CTX-18)."""

    input_per_mtok: float = 0.0
    output_per_mtok: float = 0.0
    free: bool = False


InstructionsRole = Literal["system", "developer", "user"]
INSTRUCTIONS_ROLES: tuple[InstructionsRole, ...] = ("system", "developer", "user")

#: CTX-22: the answer reserve is at most this, and by default an eighth of the window (at
#: least 1,024): an 8K model keeps 7K for the request instead of half of it.
ANSWER_RESERVE_CAP = 4_096
ANSWER_RESERVE_MIN = 1_024


def default_answer_reserve(context_window: int) -> int:
    """CTX-22: the answer reserve when the profile sets none."""
    return min(ANSWER_RESERVE_CAP, max(ANSWER_RESERVE_MIN, context_window // 8))


@dataclass(frozen=True)
class Profile:
    """What the engine needs to know about the model (PROF-1) and its memory knobs (CTX-22).

    ``answer_reserve`` None means :func:`default_answer_reserve` of the window; it is filled
    in on construction, so ``profile.answer_reserve`` is always a number.
    ``summarizer_window`` is the summariser's own context window (CTX-21: every summariser
    round fits it); None means the same model."""

    context_window: int = 32_768
    answer_reserve: int = None  # type: ignore[assignment]  # None: the window's default
    tokenizer: str = "estimate"
    stateless: bool = False
    model: str | None = None
    prices: Prices | None = None  # None: look up ``model`` in genai-prices, else free
    summarizer_prices: Prices | None = None  # None: same as ``prices``
    summarizer_window: int | None = None
    # The compaction policy's knobs (:mod:`chatmem.context.policy`, which states the rule).
    economy_pairs: int = policy.ECONOMY_PAIRS  # K (CTX-4)
    economy_batch: int = policy.ECONOMY_BATCH  # B (CTX-4)
    full_threshold_fraction: float = policy.FULL_THRESHOLD_FRACTION  # CTX-5
    full_threshold_cap: int = policy.FULL_THRESHOLD_CAP  # CTX-5
    full_keep_messages: int = policy.FULL_KEEP_MESSAGES  # CTX-5
    window_messages: int = policy.WINDOW_MESSAGES  # N (CTX-6)
    window_chars: int = policy.WINDOW_CHARS  # C (CTX-6)
    instructions_role: InstructionsRole = "system"  # CTX-22
    accepts_images: bool = False  # PROJ-2: images are sent as image parts
    #: PROJ-2: flat tokens per image; None: the provider's formula (``context.images``).
    image_tokens: int | None = None

    def __post_init__(self) -> None:
        if self.answer_reserve is None:
            object.__setattr__(self, "answer_reserve", default_answer_reserve(self.context_window))

    @property
    def summarizer_context(self) -> int:
        return self.summarizer_window or self.context_window


@dataclass(frozen=True)
class Conversation:
    """Everything the engine plans over.  ``messages`` is oldest first and may be long: the
    engine only walks the tail it needs (plan cost grows with the window, not the history)."""

    messages: Sequence[Message]
    summary: Summary | None = None
    files: Sequence[File] = ()
    instructions: str = ""
    tools: Sequence[Mapping[str, Any]] = field(default_factory=tuple)  # OpenAI tool schemas
    #: PROJ-1: the project's instructions, sent before the conversation's own.
    project_instructions: str = ""
    #: APPS-3: an app's model context, sent after the instructions (an "Apps" row, CTX-18).
    app_context: AppContext | None = None
    #: CTX-24: the pinned facts, sent after the summary in every request (a "Facts" row).
    pinned_facts: PinnedFacts | None = None
