"""Converters from other chat apps' exports to :class:`ImportedConversation`.

Each converter takes ONE conversation item (already parsed by ijson from the streamed list)
and returns its neutral form, or raises ``ValueError`` with a short reason.  What is kept:

* **ChatGPT** ``conversations.json``: the ``mapping`` is a tree of nodes (``parent`` /
  ``children``) because edits and regenerations branch; the conversation the user last saw is
  the path from the root to ``current_node``.  User, assistant and visible system messages
  with text are kept; tool traffic (browsing, code runs, ``recipient`` other than ``all``)
  and hidden system prompts are left out because they have no OpenAI-compatible equivalent.
* **Claude**: ``chat_messages`` in order, ``sender`` human/assistant; text from the ``text``
  content blocks (or the flat ``text``); attachments with extracted text become files.
* **Open WebUI**: the ``chat.history.messages`` map walked back from ``currentId`` along
  ``parentId`` (the branch on screen), else the flat ``chat.messages`` list.

Both trees are walked from a leaf up to the root; parent links that loop are refused (SEC-1),
never followed.

The stable ``source_key`` is the app name plus the conversation's own id; when an item has
no id, a hash of its title, time and message texts stands in, so re-importing the same file
is still recognised.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from chatmem.context.values import Role
from chatmem.store.exchange.records import (
    ImportedConversation,
    ImportedFile,
    ImportedMessage,
    parse_time,
)

Converter = Callable[[Mapping[str, Any]], ImportedConversation]


def _mapping(value: Any, what: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ValueError(f"{what} must be an object")
    return value


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _source_key(app: str, own_id: Any, title: str, created: Any, texts: Iterable[str]) -> str:
    if isinstance(own_id, str) and own_id:
        return f"{app}:{own_id}"
    digest = hashlib.sha256(f"{title}\x00{created}".encode())
    for text in texts:
        digest.update(b"\x00" + text.encode())
    return f"{app}:sha256:{digest.hexdigest()[:32]}"


def _title(value: Any) -> str:
    title = _text(value).strip()
    return title[:500] if title else "Imported conversation"


def _unique_ids(messages: list[ImportedMessage]) -> tuple[ImportedMessage, ...]:
    """Foreign ids are only hints; make them unique inside the conversation."""
    seen: set[str] = set()
    out = []
    for index, message in enumerate(messages):
        mid = message.id or f"m{index + 1}"
        if mid in seen:
            mid = f"{mid}#{index + 1}"
        seen.add(mid)
        out.append(message if mid == message.id else _with_id(message, mid))
    return tuple(out)


def _with_id(message: ImportedMessage, mid: str) -> ImportedMessage:
    return ImportedMessage(
        id=mid, role=message.role, content=message.content, created_at=message.created_at
    )


# --- ChatGPT -------------------------------------------------------------------------------


def chatgpt_conversation(item: Mapping[str, Any]) -> ImportedConversation:
    mapping = _mapping(item.get("mapping"), "mapping")
    path = _chatgpt_path(mapping, item.get("current_node"))
    messages: list[ImportedMessage] = []
    for node in path:
        message = node.get("message")
        if not isinstance(message, Mapping):
            continue
        converted = _chatgpt_message(message, node)
        if converted is not None:
            messages.append(converted)
    title = _title(item.get("title"))
    return ImportedConversation(
        source_key=_source_key(
            "chatgpt",
            item.get("conversation_id") or item.get("id"),
            title,
            item.get("create_time"),
            (m.content for m in messages),
        ),
        id=_text(item.get("conversation_id") or item.get("id")),
        title=title,
        messages=_unique_ids(messages),
        created_at=parse_time(item.get("create_time")),
        updated_at=parse_time(item.get("update_time")),
    )


def _chatgpt_path(mapping: Mapping[str, Any], current: Any) -> list[Mapping[str, Any]]:
    """Nodes from the root to ``current`` (or to the last leaf when it is missing)."""
    if not isinstance(current, str) or current not in mapping:
        leaves = [
            key
            for key, node in mapping.items()
            if isinstance(node, Mapping) and not node.get("children")
        ]
        if not leaves:
            return []
        current = leaves[-1]
    path: list[Mapping[str, Any]] = []
    seen: set[str] = set()
    key: Any = current
    while isinstance(key, str) and key in mapping:
        if key in seen:  # a real export is a tree; a loop is a broken or hostile file
            raise ValueError(f"mapping: the parent links form a cycle at node {key[:60]!r}")
        seen.add(key)
        node = _mapping(mapping[key], f"mapping[{key!r}]")
        path.append(node)
        key = node.get("parent")
    path.reverse()
    return path


def _chatgpt_message(message: Mapping[str, Any], node: Mapping[str, Any]) -> ImportedMessage | None:
    author = message.get("author")
    role = author.get("role") if isinstance(author, Mapping) else None
    if role not in ("user", "assistant", "system"):
        return None
    metadata = message.get("metadata")
    if isinstance(metadata, Mapping) and metadata.get("is_visually_hidden_from_conversation"):
        return None
    if role == "assistant" and message.get("recipient") not in (None, "all"):
        return None  # the model talking to a tool, not to the user
    content = message.get("content")
    text = _chatgpt_text(content) if isinstance(content, Mapping) else ""
    if not text.strip():
        return None
    return ImportedMessage(
        id=_text(message.get("id")) or _text(node.get("id")),
        role=role,
        content=text,
        created_at=parse_time(message.get("create_time")),
    )


def _chatgpt_text(content: Mapping[str, Any]) -> str:
    parts = content.get("parts")
    if isinstance(parts, list):
        pieces = []
        for part in parts:
            if isinstance(part, str):
                pieces.append(part)
            elif isinstance(part, Mapping) and isinstance(part.get("text"), str):
                pieces.append(part["text"])
        return "\n".join(p for p in pieces if p)
    return _text(content.get("text"))


# --- Claude --------------------------------------------------------------------------------

_CLAUDE_ROLES: dict[str, Role] = {"human": "user", "user": "user", "assistant": "assistant"}


def claude_conversation(item: Mapping[str, Any]) -> ImportedConversation:
    chat = item.get("chat_messages")
    if not isinstance(chat, list):
        raise ValueError("chat_messages must be a list")
    messages: list[ImportedMessage] = []
    files: list[ImportedFile] = []
    for index, raw in enumerate(chat):
        entry = _mapping(raw, f"chat_messages[{index}]")
        role = _CLAUDE_ROLES.get(_text(entry.get("sender")))
        if role is None:
            continue
        mid = _text(entry.get("uuid")) or f"m{index + 1}"
        attached = _claude_files(entry, mid)
        text = _claude_text(entry)
        if not text.strip() and not attached:
            continue
        messages.append(
            ImportedMessage(
                id=mid, role=role, content=text, created_at=parse_time(entry.get("created_at"))
            )
        )
        files.extend(attached)
    title = _title(item.get("name"))
    return ImportedConversation(
        source_key=_source_key(
            "claude", item.get("uuid"), title, item.get("created_at"), (m.content for m in messages)
        ),
        id=_text(item.get("uuid")),
        title=title,
        messages=_unique_ids(messages),
        files=tuple(files),
        created_at=parse_time(item.get("created_at")),
        updated_at=parse_time(item.get("updated_at")),
    )


def _claude_text(entry: Mapping[str, Any]) -> str:
    blocks = entry.get("content")
    if isinstance(blocks, list):
        texts = [
            b["text"]
            for b in blocks
            if isinstance(b, Mapping) and b.get("type") == "text" and isinstance(b.get("text"), str)
        ]
        if texts:
            return "\n\n".join(texts)
    return _text(entry.get("text"))


def _claude_files(entry: Mapping[str, Any], mid: str) -> list[ImportedFile]:
    out = []
    attachments = entry.get("attachments")
    for index, raw in enumerate(attachments if isinstance(attachments, list) else []):
        if not isinstance(raw, Mapping):
            continue
        content = _text(raw.get("extracted_content"))
        if not content:
            continue
        out.append(
            ImportedFile(
                id=f"{mid}-file{index + 1}",
                name=_text(raw.get("file_name")) or f"attachment-{index + 1}.txt",
                content=content,
                message_id=mid,
            )
        )
    return out


# --- Open WebUI ----------------------------------------------------------------------------


def openwebui_conversation(item: Mapping[str, Any]) -> ImportedConversation:
    chat = _mapping(item.get("chat"), "chat")
    raw_messages = _openwebui_branch(chat)
    messages: list[ImportedMessage] = []
    for index, raw in enumerate(raw_messages):
        role = raw.get("role")
        content = raw.get("content")
        if role not in ("user", "assistant", "system") or not isinstance(content, str):
            continue
        if not content.strip():
            continue
        messages.append(
            ImportedMessage(
                id=_text(raw.get("id")) or f"m{index + 1}",
                role=role,
                content=content,
                created_at=parse_time(raw.get("timestamp")),
            )
        )
    title = _title(item.get("title") or chat.get("title"))
    own_id = item.get("id") or chat.get("id")
    return ImportedConversation(
        source_key=_source_key(
            "openwebui", own_id, title, item.get("created_at"), (m.content for m in messages)
        ),
        id=_text(own_id),
        title=title,
        messages=_unique_ids(messages),
        pinned=bool(item.get("pinned")),
        created_at=parse_time(item.get("created_at") or chat.get("timestamp")),
        updated_at=parse_time(item.get("updated_at")),
    )


def _openwebui_branch(chat: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    history = chat.get("history")
    if isinstance(history, Mapping) and isinstance(history.get("messages"), Mapping):
        nodes = history["messages"]
        current = history.get("currentId")
        if not isinstance(current, str) or current not in nodes:
            current = next(reversed(list(nodes)), None) if nodes else None
        path: list[Mapping[str, Any]] = []
        seen: set[str] = set()
        while isinstance(current, str) and current in nodes:
            if current in seen:
                raise ValueError(
                    f"history.messages: the parent links form a cycle at {current[:60]!r}"
                )
            seen.add(current)
            node = _mapping(nodes[current], f"history.messages[{current!r}]")
            path.append({"id": current, **node})
            current = node.get("parentId")
        path.reverse()
        return path
    flat = chat.get("messages")
    if isinstance(flat, list):
        return [m for m in flat if isinstance(m, Mapping)]
    raise ValueError("chat has neither history.messages nor messages")


CONVERTERS: dict[str, Converter] = {
    "chatgpt": chatgpt_conversation,
    "claude": claude_conversation,
    "openwebui": openwebui_conversation,
}
