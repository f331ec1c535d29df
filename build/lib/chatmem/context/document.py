"""Reading ``chatmem.export/1`` documents into engine values (CONTRACT "Export format").

Pure: takes already-parsed JSON (mappings and lists) and returns frozen values, or raises
``PlanInputError`` with a message that says what is wrong and where (``conversations[0].
messages[3].role: …``).  Used by ``chatmem context plan`` and by the importer to validate.

The format is ours, so a key it does not define is refused with its name (SEC-1) rather than
silently dropped: the key sets below are every field the writer (``chatmem.store.exchange``:
exports and archives) produces and the readers accept.  Only ``tools`` (tool definitions) and
a message's ``meta`` (stored state an archive carries back) are free-form.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from chatmem.context.errors import PlanInputError
from chatmem.context.pinned_facts import MAX_FACT_CHARS, MAX_FACTS, render_pinned_facts
from chatmem.context.tokens import TOKENIZER_NAMES
from chatmem.context.values import (
    INSTRUCTIONS_ROLES,
    MODES,
    Conversation,
    File,
    FileState,
    Message,
    Mode,
    PinnedFacts,
    Prices,
    Profile,
    Role,
    Summary,
    ToolCall,
    default_answer_reserve,
)

EXPORT_FORMAT = "chatmem.export/1"
ROLES: tuple[Role, ...] = ("user", "assistant", "system", "tool")
FILE_STATES = ("auto", "pinned", "excluded")
DEFAULT_MODE: Mode = "full"

#: The keys each object of the format may carry (SEC-1: anything else is refused by name).
DOCUMENT_KEYS = frozenset({"format", "exported_at", "conversations"})
CONVERSATION_KEYS = frozenset(
    {
        "id",
        "title",
        "folder",
        "pinned",
        "mode",
        "profile",
        "summary",
        "summaries",
        "instructions",
        "tools",
        "messages",
        "files",
        "created_at",
        "updated_at",
        "archived",
        "archived_at",
        "versions",
        "project",
        "recall",  # issue 17: the recall switch, when set
        "facts",  # CTX-24: the pinned facts
    }
)
# ``tokens``, ``seq`` and ``meta``: what an archive keeps of a message (restored as it was);
# ``reasoning``: a reasoning model's thinking before the answer (kept, never planned).
MESSAGE_KEYS = frozenset(
    {
        "id",
        "role",
        "content",
        "excluded",
        "created_at",
        "tool_calls",
        "tool_call_id",
        "tokens",
        "seq",
        "meta",
        "hidden",
        "reasoning",
    }
)
#: PROJ-3: a version of a slot (an answer regenerated, a question edited and sent again).
VERSION_KEYS = frozenset({"kind", "slot", "number", "shown", "message_ids"})
VERSION_KINDS = ("answer", "question")
TOOL_CALL_KEYS = frozenset({"id", "type", "name", "arguments", "function"})
FUNCTION_KEYS = frozenset({"name", "arguments"})
SUMMARY_KEYS = frozenset({"text", "through", "version", "focus", "created_at", "model", "cost"})
FILE_KEYS = frozenset(
    {"id", "name", "content", "message_id", "state", "created_at", "mime", "data_base64"}
)
#: PROJ-1: a conversation's project, with its files and this conversation's state of each.
PROJECT_KEYS = frozenset({"id", "name", "instructions", "files"})
PROJECT_FILE_KEYS = frozenset({"id", "name", "content", "state", "created_at"})
#: CTX-24: a pinned fact ("Remember always"); ``message_id``: the message it was picked from.
FACT_KEYS = frozenset({"id", "text", "created_at", "message_id"})
PROFILE_KEYS = frozenset(
    {
        "context_window",
        "answer_reserve",
        "tokenizer",
        "stateless",
        "model",
        "prices",
        "economy_pairs",
        "economy_batch",
        "full_keep_last",
        "full_keep_messages",
        "full_threshold_fraction",
        "full_threshold_cap",
        "instructions_role",
        "window_messages",
        "window_chars",
    }
)
PRICE_KEYS = frozenset({"input_per_mtok", "output_per_mtok", "free"})


@dataclass(frozen=True)
class ExportedConversation:
    id: str
    title: str
    conversation: Conversation
    profile: Profile
    mode: Mode
    #: PROJ-3: the hidden versions' message ids — kept in the file, never planned ("hidden").
    hidden: tuple[str, ...] = ()


def _fail(where: str, problem: str) -> PlanInputError:
    return PlanInputError(f"{where}: {problem}" if where else problem)


def _mapping(value: Any, where: str, keys: Collection[str] | None = None) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise _fail(where, f"expected an object, got {type(value).__name__}")
    if keys is not None:
        check_keys(value, keys, where)
    return value


def check_keys(obj: Mapping[str, Any], keys: Collection[str], where: str) -> None:
    """Refuse the first key of ``obj`` that the format does not define, by name."""
    for key in obj:
        if key not in keys:
            shown = key if len(key) <= 60 else key[:57] + "…"
            raise _fail(
                f"{where}.{shown}" if where else shown,
                f"unknown field (the {EXPORT_FORMAT} format has no such field)",
            )


def _list(value: Any, where: str) -> Sequence[Any]:
    if not isinstance(value, list | tuple):
        raise _fail(where, f"expected a list, got {type(value).__name__}")
    return value


def _str(obj: Mapping[str, Any], key: str, where: str, *, required: bool = True) -> str | None:
    value = obj.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, str):
        raise _fail(f"{where}.{key}", "expected a string" if key in obj else "missing")
    return value


def _bool(obj: Mapping[str, Any], key: str, where: str, default: bool = False) -> bool:
    value = obj.get(key, default)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise _fail(f"{where}.{key}", "expected true or false")
    return value


def _int(obj: Mapping[str, Any], key: str, where: str, default: int, minimum: int) -> int:
    value = obj.get(key, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise _fail(f"{where}.{key}", f"expected a whole number of at least {minimum}")
    return value


def _tool_calls(value: Any, where: str) -> tuple[ToolCall, ...]:
    if value is None:
        return ()
    calls = []
    for k, item in enumerate(_list(value, where)):
        here = f"{where}[{k}]"
        call = _mapping(item, here, TOOL_CALL_KEYS)
        function = call.get("function")
        source = (
            _mapping(function, f"{here}.function", FUNCTION_KEYS) if function is not None else call
        )
        arguments = source.get("arguments", "{}")
        if not isinstance(arguments, str):
            raise _fail(f"{here}.arguments", "expected a JSON string")
        calls.append(
            ToolCall(
                id=cast(str, _str(call, "id", here)),
                name=cast(str, _str(source, "name", here)),
                arguments=arguments,
            )
        )
    return tuple(calls)


def _message(value: Any, where: str) -> Message:
    obj = _mapping(value, where, MESSAGE_KEYS)
    role = obj.get("role")
    if role not in ROLES:
        raise _fail(f"{where}.role", f"expected one of {', '.join(ROLES)}, got {role!r}")
    content = obj.get("content", "")
    if content is None:
        content = ""
    if not isinstance(content, str):
        raise _fail(f"{where}.content", "expected a string")
    return Message(
        id=cast(str, _str(obj, "id", where)),
        role=role,
        content=content,
        excluded=_bool(obj, "excluded", where),
        tool_calls=_tool_calls(obj.get("tool_calls"), f"{where}.tool_calls"),
        tool_call_id=_str(obj, "tool_call_id", where, required=False),
    )


def _profile(value: Any, where: str) -> Profile:
    if value is None:
        return Profile()
    obj = _mapping(value, where, PROFILE_KEYS)
    defaults = Profile()
    tokenizer = obj.get("tokenizer") or defaults.tokenizer
    if tokenizer not in TOKENIZER_NAMES:
        raise _fail(f"{where}.tokenizer", f"expected one of {', '.join(TOKENIZER_NAMES)}")
    prices = None
    if obj.get("prices") is not None:
        p = _mapping(obj["prices"], f"{where}.prices", PRICE_KEYS)
        try:
            prices = Prices(
                input_per_mtok=float(p.get("input_per_mtok", 0.0)),
                output_per_mtok=float(p.get("output_per_mtok", 0.0)),
                free=bool(p.get("free", False)),
            )
        except (TypeError, ValueError, OverflowError):
            raise _fail(f"{where}.prices", "expected numbers") from None
        if not all(
            math.isfinite(x) and x >= 0 for x in (prices.input_per_mtok, prices.output_per_mtok)
        ):
            raise _fail(f"{where}.prices", "expected finite numbers, not below 0")
    window = _int(obj, "context_window", where, defaults.context_window, 1)
    reserve = _int(obj, "answer_reserve", where, default_answer_reserve(window), 0)
    keep = _int(obj, "full_keep_last", where, defaults.full_keep_messages, 0)  # older name
    role = obj.get("instructions_role") or defaults.instructions_role
    if role not in INSTRUCTIONS_ROLES:
        raise _fail(
            f"{where}.instructions_role", f"expected one of {', '.join(INSTRUCTIONS_ROLES)}"
        )
    fraction = obj.get("full_threshold_fraction", defaults.full_threshold_fraction)
    if (
        isinstance(fraction, bool)
        or not isinstance(fraction, int | float)
        or not 0.05 <= fraction <= 1.0
    ):
        raise _fail(f"{where}.full_threshold_fraction", "expected a number from 0.05 to 1")
    return Profile(
        context_window=window,
        answer_reserve=reserve,
        tokenizer=tokenizer,
        stateless=_bool(obj, "stateless", where),
        model=_str(obj, "model", where, required=False),
        prices=prices,
        economy_pairs=_int(obj, "economy_pairs", where, defaults.economy_pairs, 0),
        economy_batch=_int(obj, "economy_batch", where, defaults.economy_batch, 1),
        full_keep_messages=_int(obj, "full_keep_messages", where, keep, 0),
        full_threshold_fraction=float(fraction),
        full_threshold_cap=_int(obj, "full_threshold_cap", where, defaults.full_threshold_cap, 1),
        instructions_role=role,
        window_messages=_int(obj, "window_messages", where, defaults.window_messages, 1),
        window_chars=_int(obj, "window_chars", where, defaults.window_chars, 1),
    )


def conversation_from_export(obj: Mapping[str, Any]) -> tuple[Conversation, Profile, Mode]:
    """One conversation object of ``chatmem.export/1`` as engine values."""
    item = _exported(obj, "conversation")
    return item.conversation, item.profile, item.mode


def _exported(value: Any, where: str) -> ExportedConversation:
    obj = _mapping(value, where, CONVERSATION_KEYS)
    conv_id = _str(obj, "id", where, required=False) or ""
    title = obj.get("title") or ""
    if not isinstance(title, str):
        raise _fail(f"{where}.title", "expected a string")
    mode = obj.get("mode") or DEFAULT_MODE
    if mode not in MODES:
        raise _fail(f"{where}.mode", f"expected one of {', '.join(MODES)}, got {mode!r}")
    messages, ids, hidden = _messages(obj, where)
    _versions(obj.get("versions"), f"{where}.versions", ids)
    summary = _summary(obj, where, ids, hidden)
    files = _files(obj, where, ids)
    instructions = _str(obj, "instructions", where, required=False) or ""
    project_instructions, project_files = _project(obj.get("project"), f"{where}.project")
    files[:0] = project_files
    if len({f.id for f in files}) != len(files):
        raise _fail(f"{where}.project.files", "a project file repeats a file id")
    tools = [
        _mapping(t, f"{where}.tools[{k}]")
        for k, t in enumerate(_list(obj.get("tools") or [], f"{where}.tools"))
    ]
    conversation = Conversation(
        messages=tuple(messages),
        summary=summary,
        files=tuple(files),
        instructions=instructions,
        tools=tuple(tools),
        project_instructions=project_instructions,
        pinned_facts=_pinned_facts(obj.get("facts"), f"{where}.facts"),
    )
    return ExportedConversation(
        id=conv_id,
        title=title,
        conversation=conversation,
        profile=_profile(obj.get("profile"), f"{where}.profile"),
        mode=mode,
        hidden=hidden,
    )


def _messages(
    obj: Mapping[str, Any], where: str
) -> tuple[list[Message], set[str], tuple[str, ...]]:
    """The messages the plan reads, every id in the file (unique), and the hidden ones
    (PROJ-3: in the file but never in the plan)."""
    raw_messages = _list(obj.get("messages", []), f"{where}.messages")
    messages = [_message(m, f"{where}.messages[{k}]") for k, m in enumerate(raw_messages)]
    ids: set[str] = set()
    for k, message in enumerate(messages):
        if message.id in ids:
            raise _fail(f"{where}.messages[{k}].id", f"duplicate message id {message.id!r}")
        ids.add(message.id)
    hidden = tuple(
        m.id
        for k, (m, raw) in enumerate(zip(messages, raw_messages, strict=True))
        if _bool(raw, "hidden", f"{where}.messages[{k}]")
    )
    if hidden:
        gone = set(hidden)
        messages = [m for m in messages if m.id not in gone]
    return messages, ids, hidden


def _summary(
    obj: Mapping[str, Any], where: str, ids: set[str], hidden: tuple[str, ...]
) -> Summary | None:
    """The summary, covering a message the plan reads; its ``through`` null: a summary
    carried into a continued conversation, covering none (CTX-23)."""
    if obj.get("summary") is None:
        return None
    s = _mapping(obj["summary"], f"{where}.summary", SUMMARY_KEYS)
    through = _str(s, "through", f"{where}.summary", required=False)
    if through is not None and (through not in ids or through in hidden):
        raise _fail(f"{where}.summary.through", f"no message with id {through!r}")
    return Summary(
        text=cast(str, _str(s, "text", f"{where}.summary")),
        through=through,
        focus=_str(s, "focus", f"{where}.summary", required=False),
    )


def _files(obj: Mapping[str, Any], where: str, ids: set[str]) -> list[File]:
    """The conversation's files, each attached to a message of the file or to none."""
    files = []
    for k, f in enumerate(_list(obj.get("files") or [], f"{where}.files")):
        here = f"{where}.files[{k}]"
        fo = _mapping(f, here, FILE_KEYS)
        state = fo.get("state") or "auto"
        if state not in FILE_STATES:
            raise _fail(f"{here}.state", f"expected one of {', '.join(FILE_STATES)}")
        message_id = _str(fo, "message_id", here, required=False)
        if message_id is not None and message_id not in ids:
            raise _fail(f"{here}.message_id", f"no message with id {message_id!r}")
        files.append(
            File(
                id=cast(str, _str(fo, "id", here)),
                name=cast(str, _str(fo, "name", here)),
                content=_str(fo, "content", here, required=False) or "",
                message_id=message_id,
                state=cast(FileState, state),
                # a binary attachment (PROV-4): never sent, its bytes are not needed here
                mime=(_str(fo, "mime", here, required=False) or "application/octet-stream")
                if fo.get("data_base64") is not None
                else None,
            )
        )
    return files


def _pinned_facts(value: Any, where: str) -> PinnedFacts | None:
    """CTX-24: the pinned facts (oldest first), sent as one message; the offline plan counts
    it.  Bounded as the API bounds them."""
    if value is None:
        return None
    items = _list(value, where)
    if len(items) > MAX_FACTS:
        raise _fail(where, f"at most {MAX_FACTS} pinned facts, got {len(items)}")
    texts = []
    for k, item in enumerate(items):
        here = f"{where}[{k}]"
        fact = _mapping(item, here, FACT_KEYS)
        text = cast(str, _str(fact, "text", here)).strip()
        if not text:
            raise _fail(f"{here}.text", "a pinned fact is not empty")
        if len(text) > MAX_FACT_CHARS:
            raise _fail(f"{here}.text", f"a pinned fact is at most {MAX_FACT_CHARS:,} characters")
        # The message it was picked from; it may be gone (a fact outlives its message).
        _str(fact, "message_id", here, required=False)
        _str(fact, "created_at", here, required=False)
        texts.append(text)
    return PinnedFacts(render_pinned_facts(texts)) if texts else None


def _project(value: Any, where: str) -> tuple[str, list[File]]:
    """PROJ-1: the project's instructions and files (sent with the conversation's)."""
    if value is None:
        return "", []
    obj = _mapping(value, where, PROJECT_KEYS)
    _str(obj, "name", where)
    files = []
    for k, f in enumerate(_list(obj.get("files") or [], f"{where}.files")):
        here = f"{where}.files[{k}]"
        fo = _mapping(f, here, PROJECT_FILE_KEYS)
        state = fo.get("state") or "auto"
        if state not in FILE_STATES:
            raise _fail(f"{here}.state", f"expected one of {', '.join(FILE_STATES)}")
        files.append(
            File(
                id=cast(str, _str(fo, "id", here)),
                name=cast(str, _str(fo, "name", here)),
                content=_str(fo, "content", here, required=False) or "",
                state=cast(FileState, state),
            )
        )
    return _str(obj, "instructions", where, required=False) or "", files


def _versions(value: Any, where: str, ids: Collection[str]) -> None:
    """PROJ-3: checks a conversation's ``versions`` (what the importer restores)."""
    if value is None:
        return
    for k, item in enumerate(_list(value, where)):
        here = f"{where}[{k}]"
        version = _mapping(item, here, VERSION_KEYS)
        if version.get("kind") not in VERSION_KINDS:
            raise _fail(f"{here}.kind", f"expected one of {', '.join(VERSION_KINDS)}")
        _str(version, "slot", here)
        _int(version, "number", here, 1, 1)
        _bool(version, "shown", here)
        for j, message_id in enumerate(_list(version.get("message_ids", []), here)):
            if not isinstance(message_id, str) or message_id not in ids:
                raise _fail(f"{here}.message_ids[{j}]", f"no message with id {message_id!r}")


def load_export(obj: Any) -> list[ExportedConversation]:
    """Every conversation of a ``{"format": "chatmem.export/1", "conversations": [...]}``
    document; a foreign or malformed document raises ``PlanInputError``."""
    if not isinstance(obj, Mapping) or obj.get("format") != EXPORT_FORMAT:
        raise PlanInputError(f'not a chatmem export (expected "format": "{EXPORT_FORMAT}")')
    check_keys(obj, DOCUMENT_KEYS, "")
    return [
        _exported(c, f"conversations[{k}]")
        for k, c in enumerate(_list(obj.get("conversations"), "conversations"))
    ]
