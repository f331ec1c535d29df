"""The neutral shape every importer produces and the store writes: one frozen value per
conversation.

Parsers (native, ChatGPT, Claude, Open WebUI) turn one JSON item at a time into an
:class:`ImportedConversation`; the importer never sees a foreign format.  ``source_key`` is the
stable identity of the conversation in its source (``chatgpt:<id>``, ``claude:<uuid>``, …):
importing the same file twice finds the key already recorded and skips the conversation.
Ids inside a conversation (message, file, summary ``through``) are the source's own; the
importer keeps them when they are free and remaps them consistently when they are not.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from chatmem.context.values import FileState, Mode, Role, ToolCall

ROLES: frozenset[str] = frozenset({"user", "assistant", "system", "tool"})
MODES: frozenset[str] = frozenset({"off", "economy", "full", "window"})
FILE_STATES: frozenset[str] = frozenset({"auto", "pinned", "excluded"})
# Non-secret profile settings carried by an export (never API keys or endpoints).
PROFILE_KEYS: tuple[str, ...] = ("context_window", "answer_reserve", "tokenizer", "stateless")


@dataclass(frozen=True)
class ImportedMessage:
    id: str
    role: Role
    content: str
    created_at: datetime | None = None
    excluded: bool = False
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    #: PROJ-3: a version not shown (chatmem exports only).
    hidden: bool = False
    #: A reasoning model's thinking before this answer: kept beside it, never sent back.
    reasoning: str | None = None


@dataclass(frozen=True)
class ImportedSummary:
    text: str
    through: str | None  # a message id of the same conversation; None: covers none (CTX-23)
    version: int = 1
    focus: str | None = None
    created_at: datetime | None = None
    model: str | None = None
    cost: float = 0.0


@dataclass(frozen=True)
class ImportedFile:
    id: str
    name: str
    content: str
    message_id: str | None = None
    state: FileState = "auto"
    created_at: datetime | None = None
    #: A binary attachment (PROV-4): its media type and bytes (``content`` is then empty).
    mime: str | None = None
    data: bytes | None = field(default=None, repr=False)


@dataclass(frozen=True)
class Asset:
    """A file an export holds the bytes of (a ChatGPT ZIP's ``file-AbC…-name.png``)."""

    name: str
    data: bytes = field(repr=False)


@dataclass(frozen=True)
class ImportedConversation:
    source_key: str
    id: str  # the source's id (native: the chatmem id, kept when free)
    title: str
    messages: tuple[ImportedMessage, ...]
    folder: str | None = None
    pinned: bool = False
    mode: Mode | None = None
    profile: Mapping[str, Any] | None = None
    summaries: tuple[ImportedSummary, ...] = ()  # oldest first; the last is the current one
    files: tuple[ImportedFile, ...] = ()
    created_at: datetime | None = None
    updated_at: datetime | None = None
    archived: bool = False  # chatmem exports only: archive it again once the import commits
    #: PROJ-3 (chatmem exports only): the versions of answers and questions, as exported.
    versions: tuple[Mapping[str, Any], ...] = ()
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def size(self) -> int:
        """Rough size in characters, for progress and quotas."""
        return sum(len(m.content) for m in self.messages) + sum(len(f.content) for f in self.files)


def parse_time(value: Any) -> datetime | None:
    """Accept ISO-8601 strings and epoch seconds (or milliseconds); ``None`` when absent."""
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        raise ValueError("a time must be a string or a number")
    if isinstance(value, (int, float)):
        seconds = float(value)
        if seconds > 1e11:  # milliseconds (or finer) since the epoch
            seconds /= 1000.0
            if seconds > 1e11:
                seconds /= 1000.0
        return datetime.fromtimestamp(seconds, tz=UTC)
    if isinstance(value, str):
        text = value.strip()
        if text.endswith("Z"):
            text = text[:-1] + "+00:00"
        parsed = datetime.fromisoformat(text)
        return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
    # ijson yields Decimal for non-integers unless use_float is set
    try:
        return parse_time(float(value))
    except (TypeError, ValueError):
        raise ValueError(f"not a time: {value!r}") from None


def format_time(value: datetime | None) -> str | None:
    """The export's time form: UTC, ISO-8601 with ``Z``, microseconds only when present."""
    if value is None:
        return None
    if value.tzinfo is None:  # SQLite hands back naive datetimes; chatmem stores UTC
        value = value.replace(tzinfo=UTC)
    text = value.astimezone(UTC).isoformat()
    return text.replace("+00:00", "Z")
