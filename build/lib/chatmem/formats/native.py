"""chatmem's own export format, ``chatmem.export/1`` (CONTRACT): a streamed writer and a
validating reader.

**Writer.** The document is produced as a sequence of byte chunks — the header, then each
conversation, then each of its messages one by one — so exporting years of history never
holds more than one message's JSON in memory and an HTTP download starts at once.  Field
order is fixed (``format`` first) so the reader's sniff finds the format in the first bytes.

**Reader.** One conversation item at a time (ijson hands it over already parsed) is first
validated by the engine's own reader (``chatmem.context.document.conversation_from_export``,
so import accepts exactly what ``chatmem context plan`` accepts), then checked field by field
for what the store needs beyond the engine and becomes an :class:`ImportedConversation`; a mistake names the
conversation and the field.  Besides the CONTRACT fields the reader accepts what the writer
adds for a lossless round trip: ``summaries`` (history, oldest first), ``facts`` (the pinned
facts, CTX-24), ``created_at`` /
``updated_at``, ``tool_calls`` / ``tool_call_id`` and ``reasoning`` (a reasoning model's
thinking before the answer) on messages.  A summary's ``through`` may be
null: a conversation continued from another one's summary (CTX-23) starts with a summary
that covers none of its messages.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from chatmem.context.document import SUMMARY_KEYS, conversation_from_export
from chatmem.context.errors import PlanInputError
from chatmem.context.values import ToolCall
from chatmem.formats.detect import NATIVE_FORMAT
from chatmem.formats.records import (
    FILE_STATES,
    MODES,
    PROFILE_KEYS,
    ROLES,
    ImportedConversation,
    ImportedFile,
    ImportedMessage,
    ImportedSummary,
    parse_time,
)


@dataclass
class ExportedConversation:
    """One conversation ready to be written: its fields, then messages and files lazily."""

    head: Mapping[str, Any]  # id, title, folder, pinned, mode, profile, summary, summaries, times
    messages: Iterable[Mapping[str, Any]]
    files: Iterable[Mapping[str, Any]] = field(default_factory=tuple)


def _dump(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()


def export_chunks(
    conversations: Iterable[ExportedConversation], exported_at: str | None = None
) -> Iterator[bytes]:
    """The whole export document as byte chunks, produced lazily."""
    header: dict[str, Any] = {"format": NATIVE_FORMAT}
    if exported_at:
        header["exported_at"] = exported_at
    yield _dump(header)[:-1] + b',"conversations":['
    for index, conversation in enumerate(conversations):
        yield from conversation_chunks(conversation, first=index == 0)
    yield b"]}\n"


def conversation_chunks(conversation: ExportedConversation, first: bool = True) -> Iterator[bytes]:
    head = _dump(dict(conversation.head))
    yield (b"" if first else b",") + head[:-1] + b',"messages":['
    for index, message in enumerate(conversation.messages):
        yield (b"," if index else b"") + _dump(dict(message))
    yield b'],"files":['
    for index, item in enumerate(conversation.files):
        yield (b"," if index else b"") + _dump(dict(item))
    yield b"]}"


# --- reader --------------------------------------------------------------------------------

#: The dearest summary an import accepts, in USD (SEC-1: finite and in range).
MAX_COST = 1_000_000


class _Check:
    """Field checks that say where the problem is."""

    def __init__(self, where: str) -> None:
        self.where = where

    def fail(self, field_name: str, problem: str) -> ValueError:
        return ValueError(f"{self.where}: {field_name} {problem}")

    def string(self, data: Mapping[str, Any], key: str, *, required: bool = False) -> str | None:
        value = data.get(key)
        if value is None:
            if required:
                raise self.fail(key, "is required")
            return None
        if not isinstance(value, str):
            raise self.fail(key, "must be a string")
        return value

    def boolean(self, data: Mapping[str, Any], key: str) -> bool:
        value = data.get(key, False)
        if value is None:
            return False
        if not isinstance(value, bool):
            raise self.fail(key, "must be true or false")
        return value

    def time(self, data: Mapping[str, Any], key: str) -> Any:
        try:
            return parse_time(data.get(key))
        except (ValueError, OverflowError, OSError):
            raise self.fail(key, "must be an ISO-8601 time") from None

    def objects(self, data: Mapping[str, Any], key: str) -> list[Mapping[str, Any]]:
        value = data.get(key, [])
        if value is None:
            return []
        if not isinstance(value, list) or not all(isinstance(v, Mapping) for v in value):
            raise self.fail(key, "must be a list of objects")
        return value


def native_conversation(item: Mapping[str, Any]) -> ImportedConversation:
    """Validate one ``conversations[]`` item of a ``chatmem.export/1`` document."""
    if not isinstance(item, Mapping):
        raise ValueError("a conversation must be an object")
    try:  # the engine's reading of the format (what `chatmem context plan` accepts) first
        conversation_from_export(item)
    except PlanInputError as exc:
        raise ValueError(str(exc)) from None
    check = _Check("conversation")
    cid = check.string(item, "id", required=True) or ""
    if not cid.strip():
        raise check.fail("id", "must not be empty")
    check = _Check(f"conversation {cid!r}")
    mode = item.get("mode")
    if mode is not None and mode not in MODES:
        raise check.fail("mode", f"must be one of {', '.join(sorted(MODES))}")
    messages = tuple(_message(m, check) for m in check.objects(item, "messages"))
    ids = [m.id for m in messages]
    if len(set(ids)) != len(ids):
        raise check.fail("messages", "repeat a message id")
    known = set(ids)
    summaries = _summaries(item, check, known)
    files = tuple(_file(f, check, known) for f in check.objects(item, "files"))
    if len({f.id for f in files}) != len(files):
        raise check.fail("files", "repeat a file id")
    return ImportedConversation(
        source_key=f"chatmem:{cid}",
        id=cid,
        title=check.string(item, "title") or "",
        folder=check.string(item, "folder"),
        pinned=check.boolean(item, "pinned"),
        mode=mode,
        profile=_profile(item.get("profile"), check),
        messages=messages,
        summaries=summaries,
        files=files,
        created_at=check.time(item, "created_at"),
        updated_at=check.time(item, "updated_at"),
        archived=check.boolean(item, "archived"),
        # PROJ-3: checked with the format above (the engine's reading of it)
        versions=tuple(check.objects(item, "versions")),
        extra={
            "instructions": check.string(item, "instructions") or "",
            # issue 17: the recall switch (absent or null: the default)
            "recall": check.boolean(item, "recall") if item.get("recall") is not None else None,
            # PROJ-1: checked with the format above (the engine's reading of it)
            "project": item.get("project"),
            # CTX-24: the pinned facts, checked with the format above
            "facts": tuple(_fact(f, check) for f in check.objects(item, "facts")),
        },
    )


def _fact(data: Mapping[str, Any], check: _Check) -> dict[str, Any]:
    """CTX-24: a pinned fact as the importer stores it (text trimmed as the API keeps it)."""
    return {
        "text": (check.string(data, "text", required=True) or "").strip(),
        "message_id": check.string(data, "message_id"),
        "created_at": check.time(data, "created_at"),
    }


def _message(data: Mapping[str, Any], parent: _Check) -> ImportedMessage:
    mid = parent.string(data, "id", required=True) or ""
    check = _Check(f"{parent.where}, message {mid!r}")
    role = data.get("role")
    if role not in ROLES:
        raise check.fail("role", f"must be one of {', '.join(sorted(ROLES))}")
    content = data.get("content", "")
    if not isinstance(content, str):
        raise check.fail("content", "must be a string")
    calls = []
    for raw in check.objects(data, "tool_calls"):
        nested = raw.get("function")  # the OpenAI wire shape nests name and arguments
        source = nested if isinstance(nested, Mapping) else raw
        name = check.string(source, "name", required=True) or ""
        arguments = source.get("arguments", "{}")
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments)
        calls.append(
            ToolCall(
                id=check.string(raw, "id", required=True) or "", name=name, arguments=arguments
            )
        )
    tool_call_id = check.string(data, "tool_call_id")
    if role == "tool" and not tool_call_id:
        raise check.fail("tool_call_id", "is required on a tool message")
    return ImportedMessage(
        id=mid,
        role=role,
        content=content,
        created_at=check.time(data, "created_at"),
        excluded=check.boolean(data, "excluded"),
        tool_calls=tuple(calls),
        tool_call_id=tool_call_id,
        hidden=check.boolean(data, "hidden"),
        reasoning=check.string(data, "reasoning"),
    )


def _summaries(
    item: Mapping[str, Any], check: _Check, known: set[str]
) -> tuple[ImportedSummary, ...]:
    out: list[ImportedSummary] = []
    for index, raw in enumerate(check.objects(item, "summaries")):
        out.append(_summary(raw, check, known, index + 1))
    current = item.get("summary")
    if current is not None:
        if not isinstance(current, Mapping):
            raise check.fail("summary", "must be an object or null")
        latest = _summary(current, check, known, len(out) + 1)
        # ``summary`` is the current one; ``summaries`` (when present) already ends with it.
        if not out or (out[-1].text, out[-1].through) != (latest.text, latest.through):
            out.append(latest)
    return tuple(out)


def _summary(
    data: Mapping[str, Any], parent: _Check, known: set[str], default_version: int
) -> ImportedSummary:
    check = _Check(f"{parent.where}, summary")
    for key in data:
        if key not in SUMMARY_KEYS:
            raise check.fail(str(key)[:60], f"is not a field of {NATIVE_FORMAT}")
    text = check.string(data, "text", required=True) or ""
    # null: a summary carried from another conversation that covers none of these (CTX-23).
    through = check.string(data, "through")
    if through is not None and through not in known:
        raise check.fail("through", f"names message {through!r}, which is not in the conversation")
    version = data.get("version", default_version)
    if not isinstance(version, int) or isinstance(version, bool) or not 1 <= version < 2**31:
        raise check.fail("version", "must be a positive whole number")
    cost = data.get("cost", 0.0)
    if cost is None:
        cost = 0.0
    if not isinstance(cost, (int, float)) or isinstance(cost, bool) or not 0 <= cost <= MAX_COST:
        raise check.fail("cost", f"must be a number from 0 to {MAX_COST:,}")
    return ImportedSummary(
        text=text,
        through=through,
        version=version,
        focus=check.string(data, "focus"),
        created_at=check.time(data, "created_at"),
        model=check.string(data, "model"),
        cost=float(cost),
    )


def _file(data: Mapping[str, Any], parent: _Check, known: set[str]) -> ImportedFile:
    fid = parent.string(data, "id", required=True) or ""
    check = _Check(f"{parent.where}, file {fid!r}")
    message_id = check.string(data, "message_id")
    if message_id is not None and message_id not in known:
        raise check.fail(
            "message_id", f"names message {message_id!r}, which is not in the conversation"
        )
    state = data.get("state", "auto")
    if state not in FILE_STATES:
        raise check.fail("state", f"must be one of {', '.join(sorted(FILE_STATES))}")
    blob = None
    encoded = check.string(data, "data_base64")
    if encoded is not None:  # a binary attachment (PROV-4)
        try:
            blob = base64.b64decode(encoded, validate=True)
        except ValueError:
            raise check.fail("data_base64", "must be base64") from None
    return ImportedFile(
        id=fid,
        name=check.string(data, "name", required=True) or "",
        content=check.string(data, "content") or "",
        message_id=message_id,
        state=state,
        created_at=check.time(data, "created_at"),
        mime=(check.string(data, "mime") or "application/octet-stream")
        if blob is not None
        else None,
        data=blob,
    )


def _profile(value: Any, check: _Check) -> dict[str, Any] | None:
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise check.fail("profile", "must be an object or null")
    out: dict[str, Any] = {}
    for key in ("context_window", "answer_reserve"):
        if key in value and value[key] is not None:
            number = value[key]
            if isinstance(number, float) and number.is_integer():
                number = int(number)
            if not isinstance(number, int) or isinstance(number, bool) or number < 0:
                raise check.fail(f"profile.{key}", "must be a whole number")
            out[key] = number
    if value.get("tokenizer") is not None:
        out["tokenizer"] = check.string(value, "tokenizer")
    if "stateless" in value:
        out["stateless"] = _Check(f"{check.where}, profile").boolean(value, "stateless")
    # Anything else (names, endpoints, and above all API keys) is deliberately dropped.
    return {k: out[k] for k in PROFILE_KEYS if k in out} or None
