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

What a user would expect to see again (issue 16):

* An image or file the export only names becomes a visible placeholder in the message,
  ``[image: painting.png]`` / ``[file: report.pdf]``; when the export holds its bytes (a
  ChatGPT ZIP names them by file id, Open WebUI inlines ``data:`` URLs) it becomes an
  attachment of the message, and a message holding nothing else shows the placeholder too, so
  no stored message is ever empty.
* ChatGPT's private-use citation markers (``\ue200cite\ue202turn0search3\ue201`` …, U+E200 to
  U+E2FF) become the readable reference the export gives for them (``content_references``
  ``alt``: ``([Wikipedia](https://…))``), an entity marker its name, anything else nothing.
* Open WebUI's system prompt (``chat.params.system``) becomes the conversation's instructions.

The stable ``source_key`` is the app name plus the conversation's own id; when an item has
no id, a hash of its title, time and message texts stands in, so re-importing the same file
is still recognised.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import mimetypes
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from pathlib import PurePosixPath
from typing import Any

from chatmem.context.values import Role
from chatmem.errors import InvalidInput, PayloadTooLarge
from chatmem.formats.images import inspect_image, sniff
from chatmem.formats.records import (
    Asset,
    ImportedConversation,
    ImportedFile,
    ImportedMessage,
    parse_time,
)

#: Looks a file up by the export's own id for it (``file-AbC…``); ``None`` when not held.
FindAsset = Callable[[str], Asset | None]


def no_assets(_file_id: str) -> Asset | None:
    return None


Converter = Callable[[Mapping[str, Any], FindAsset], ImportedConversation]


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


def placeholder(kind: str, name: str) -> str:
    """What stands in the text for an image or file: ``[image: painting.png]``."""
    name = " ".join(name.split())[:200]
    return f"[{kind}: {name}]" if name else f"[{kind}]"


def media_type(name: str, data: bytes, declared: Any = None) -> str:
    """The media type of a file that is not an image: a PDF by its signature, else as the
    export declared it, else by its name."""
    if data.startswith(b"%PDF-"):
        return "application/pdf"
    if isinstance(declared, str) and "/" in declared:
        return declared.strip().lower()[:200]
    guessed, _ = mimetypes.guess_type(name)
    return guessed or "application/octet-stream"


def usable_image(data: bytes) -> str | None:
    """The media type of bytes :func:`~chatmem.store.images.add_image` will store (a PNG,
    JPEG, GIF or WebP it can read, not too large), else ``None``: a placeholder then."""
    try:
        return inspect_image(data).mime
    except (InvalidInput, PayloadTooLarge):
        return None


def _is_image_name(name: str) -> bool:
    guessed, _ = mimetypes.guess_type(name)
    return bool(guessed and guessed.startswith("image/"))


def _with_placeholders(text: str, placeholders: list[str]) -> str:
    """Placeholders first, each on its own line (as chat apps show attachments above)."""
    if not placeholders:
        return text
    head = "\n".join(placeholders)
    return f"{head}\n{text}" if text.strip() else head


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
    return replace(message, id=mid)


# --- ChatGPT -------------------------------------------------------------------------------


def chatgpt_conversation(
    item: Mapping[str, Any], find_asset: FindAsset = no_assets
) -> ImportedConversation:
    mapping = _mapping(item.get("mapping"), "mapping")
    path = _chatgpt_path(mapping, item.get("current_node"))
    messages: list[ImportedMessage] = []
    files: list[ImportedFile] = []
    thoughts: list[str] = []  # a reasoning model's, for the answer that follows them
    for node in path:
        message = node.get("message")
        if not isinstance(message, Mapping):
            continue
        thought = _chatgpt_thoughts(message)
        if thought is not None:
            thoughts.append(thought)
            continue
        converted = _chatgpt_message(message, node, find_asset)
        if converted is not None:
            said = converted[0]
            if said.role == "assistant" and thoughts:
                said = replace(said, reasoning="\n\n".join(t for t in thoughts if t) or None)
            if said.role != "system":
                thoughts = []
            messages.append(said)
            files.extend(converted[1])
    title = _title(item.get("title"))
    unique = _unique_ids(messages)
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
        messages=unique,
        files=_files_of(files, messages, unique),
        created_at=parse_time(item.get("create_time")),
        updated_at=parse_time(item.get("update_time")),
    )


def _files_of(
    files: list[ImportedFile], before: list[ImportedMessage], after: tuple[ImportedMessage, ...]
) -> tuple[ImportedFile, ...]:
    """Files follow their message when :func:`_unique_ids` renamed it."""
    renamed = {old.id: new.id for old, new in zip(before, after, strict=True) if old.id != new.id}
    if not renamed:
        return tuple(files)
    return tuple(
        _file_for(f, renamed[f.message_id]) if f.message_id in renamed else f for f in files
    )


def _file_for(item: ImportedFile, message_id: str) -> ImportedFile:
    return ImportedFile(
        id=f"{message_id}-{item.id}",
        name=item.name,
        content=item.content,
        message_id=message_id,
        mime=item.mime,
        data=item.data,
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


def _chatgpt_message(
    message: Mapping[str, Any], node: Mapping[str, Any], find_asset: FindAsset
) -> tuple[ImportedMessage, list[ImportedFile]] | None:
    author = message.get("author")
    role = author.get("role") if isinstance(author, Mapping) else None
    if role not in ("user", "assistant", "system"):
        return None
    metadata = message.get("metadata")
    metadata = metadata if isinstance(metadata, Mapping) else {}
    if metadata.get("is_visually_hidden_from_conversation"):
        return None
    if role == "assistant" and message.get("recipient") not in (None, "all"):
        return None  # the model talking to a tool, not to the user
    mid = _text(message.get("id")) or _text(node.get("id"))
    content = message.get("content")
    parts = _ChatgptParts(metadata, find_asset, mid)
    text = parts.text(content) if isinstance(content, Mapping) else ""
    text = readable_citations(text, metadata.get("content_references"))
    if not text.strip():
        return None
    return (
        ImportedMessage(
            id=mid, role=role, content=text, created_at=parse_time(message.get("create_time"))
        ),
        parts.files,
    )


def _chatgpt_thoughts(message: Mapping[str, Any]) -> str | None:
    """A reasoning model's thinking (``content_type: "thoughts"``: each thought's summary and
    text), or None for any other message."""
    content = message.get("content")
    if not isinstance(content, Mapping) or content.get("content_type") != "thoughts":
        return None
    texts: list[str] = []
    for thought in content.get("thoughts") or []:
        if isinstance(thought, Mapping):
            lines = [_text(thought.get("summary")).strip(), _text(thought.get("content")).strip()]
            texts.append("\n".join(line for line in lines if line))
    return "\n\n".join(t for t in texts if t)


def _file_id(pointer: str) -> str:
    """``file-service://file-AbC`` / ``sediment://file_00ab…`` → the file id."""
    return pointer.rsplit("/", 1)[-1]


class _ChatgptParts:
    """The text of one ChatGPT message: its string parts, a placeholder or an attachment for
    each image part, and the files of ``metadata.attachments`` no part showed."""

    def __init__(self, metadata: Mapping[str, Any], find_asset: FindAsset, mid: str) -> None:
        self.find_asset = find_asset
        self.mid = mid
        self.files: list[ImportedFile] = []
        self.names: dict[str, Mapping[str, Any]] = {}
        attachments = metadata.get("attachments")
        for entry in attachments if isinstance(attachments, list) else []:
            if isinstance(entry, Mapping) and isinstance(entry.get("id"), str):
                self.names[entry["id"]] = entry

    def text(self, content: Mapping[str, Any]) -> str:
        parts = content.get("parts")
        if not isinstance(parts, list):
            return _text(content.get("text"))
        # (text, what): "text" written by someone, "named" a placeholder for a file the
        # export does not hold, "attached" a placeholder for a file that became an attachment
        pieces: list[tuple[str, str]] = []
        shown: set[str] = set()
        for part in parts:
            if isinstance(part, str):
                pieces.append((part, "text"))
            elif isinstance(part, Mapping):
                if part.get("content_type") == "image_asset_pointer":
                    file_id = _file_id(_text(part.get("asset_pointer")))
                    shown.add(file_id)
                    pieces.append(self._attach(file_id, "image", part.get("mime_type")))
                elif isinstance(part.get("text"), str):
                    pieces.append((part["text"], "text"))
        for file_id, entry in self.names.items():  # files sent along, not shown as parts
            if file_id not in shown:
                kind = "image" if _is_image_name(_text(entry.get("name"))) else "file"
                pieces.insert(0, self._attach(file_id, kind, entry.get("mime_type")))
        # An attachment shows in the message; its placeholder stands only where no text is.
        written = any(text.strip() for text, what in pieces if what == "text")
        return "\n".join(
            text for text, what in pieces if text and (what != "attached" or not written)
        )

    def _attach(self, file_id: str, kind: str, declared: Any) -> tuple[str, str]:
        entry = self.names.get(file_id, {})
        asset = self.find_asset(file_id) if file_id else None
        name = _text(entry.get("name")) or (asset.name if asset else "") or file_id
        if asset is None:
            return placeholder(kind, name), "named"
        if kind == "image" or sniff(asset.data) is not None:
            mime = usable_image(asset.data)
            if mime is None:  # not an image chatmem can store: named, as if not held
                return placeholder("image", name), "named"
        else:
            mime = media_type(name, asset.data, entry.get("mime_type") or declared)
        self.files.append(
            ImportedFile(
                id=f"{self.mid}-file{len(self.files) + 1}",
                name=name,
                content="",
                message_id=self.mid,
                mime=mime,
                data=asset.data,
            )
        )
        return placeholder(_kind(mime), name), "attached"


def _kind(mime: str | None) -> str:
    return "image" if mime and mime.startswith("image/") else "file"


# ChatGPT marks citations and named entities in the text with private-use characters:
# U+E200 opens, U+E202 separates, U+E201 closes (``\ue200cite\ue202turn0search3\ue201``).
_MARKER = re.compile("[ \\t]*\ue200([^\ue200-\ue2ff]*)\ue202([^\ue200\ue201]*)\ue201")
_PRIVATE_USE = re.compile("[\ue200-\ue2ff]")


def readable_citations(text: str, references: Any) -> str:
    """Private-use citation markers out of ``text``: each becomes the readable reference the
    export gives for it (``content_references[].alt``), an entity marker its name, any other
    marker nothing; a stray private-use character of that block is dropped."""
    # ASCII text holds no marker: known without a search (issue 16: the search of every
    # message's text cost a sixth of reading an export)
    if text.isascii() or not _PRIVATE_USE.search(text):
        return text
    for reference in references if isinstance(references, list) else []:
        if not isinstance(reference, Mapping):
            continue
        matched = reference.get("matched_text")
        if isinstance(matched, str) and matched and matched in text:
            text = text.replace(matched, _reference_text(reference))
    text = _MARKER.sub(_marker_text, text)
    return _PRIVATE_USE.sub("", text)


def _reference_text(reference: Mapping[str, Any]) -> str:
    alt = reference.get("alt")
    if isinstance(alt, str) and not _PRIVATE_USE.search(alt):
        return alt
    links = []
    items = reference.get("items")
    for entry in items if isinstance(items, list) else []:
        if isinstance(entry, Mapping) and isinstance(entry.get("url"), str):
            label = _text(entry.get("attribution")) or _text(entry.get("title")) or "source"
            links.append(f"[{label}]({entry['url']})")
    if links:
        return f" ({', '.join(links)})"
    name = reference.get("name")
    return name if isinstance(name, str) else ""


def _marker_text(match: re.Match[str]) -> str:
    kind, body = match.group(1), match.group(2)
    if kind == "entity":  # ["people", "Leo Tolstoy", "Russian writer"] → Leo Tolstoy
        try:
            value = json.loads(body)
        except ValueError:
            return ""
        if isinstance(value, list) and len(value) > 1 and isinstance(value[1], str):
            lead = match.group(0)[: len(match.group(0)) - len(match.group(0).lstrip(" \t"))]
            return lead + value[1]
    return ""


# --- Claude --------------------------------------------------------------------------------

_CLAUDE_ROLES: dict[str, Role] = {"human": "user", "user": "user", "assistant": "assistant"}


def claude_conversation(
    item: Mapping[str, Any], _find_asset: FindAsset = no_assets
) -> ImportedConversation:
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
        # Files the export only names (images: Claude's export never holds their bytes).
        shown = _claude_named_files(entry)
        if not text.strip():  # attachment-only: its files are listed where the text was
            shown += [placeholder("attachment", f.name) for f in attached]
        text = _with_placeholders(text, shown)
        if not text.strip():
            continue
        messages.append(
            ImportedMessage(
                id=mid,
                role=role,
                content=text,
                created_at=parse_time(entry.get("created_at")),
                reasoning=_claude_thinking(entry) or None,
            )
        )
        files.extend(attached)
    title = _title(item.get("name"))
    unique = _unique_ids(messages)
    return ImportedConversation(
        source_key=_source_key(
            "claude", item.get("uuid"), title, item.get("created_at"), (m.content for m in messages)
        ),
        id=_text(item.get("uuid")),
        title=title,
        messages=unique,
        files=_files_of(files, messages, unique),
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


def _claude_thinking(entry: Mapping[str, Any]) -> str:
    """Claude's extended thinking before an answer (``thinking`` blocks)."""
    blocks = entry.get("content")
    if not isinstance(blocks, list):
        return ""
    return "\n\n".join(
        b["thinking"].strip()
        for b in blocks
        if isinstance(b, Mapping)
        and b.get("type") == "thinking"
        and isinstance(b.get("thinking"), str)
        and b["thinking"].strip()
    )


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


def _claude_named_files(entry: Mapping[str, Any]) -> list[str]:
    """Placeholders for the files a message carried without their text: ``files`` /
    ``files_v2`` (images, PDFs shown as pages) and ``attachments`` with no extracted text."""
    out: list[str] = []
    seen: set[str] = set()
    for key in ("files", "files_v2", "attachments"):
        listed = entry.get(key)
        for raw in listed if isinstance(listed, list) else []:
            if not isinstance(raw, Mapping) or _text(raw.get("extracted_content")):
                continue
            name = _text(raw.get("file_name"))
            uuid = _text(raw.get("file_uuid"))
            if (uuid or name) in seen or not (uuid or name):
                continue
            seen.add(uuid or name)
            image = raw.get("file_kind") == "image" or _is_image_name(name)
            out.append(placeholder("image" if image else "file", name or uuid))
    return out


# --- Open WebUI ----------------------------------------------------------------------------


def openwebui_conversation(
    item: Mapping[str, Any], _find_asset: FindAsset = no_assets
) -> ImportedConversation:
    chat = _mapping(item.get("chat"), "chat")
    raw_messages = _openwebui_branch(chat)
    messages: list[ImportedMessage] = []
    files: list[ImportedFile] = []
    for index, raw in enumerate(raw_messages):
        role = raw.get("role")
        content = raw.get("content")
        if role not in ("user", "assistant", "system"):
            continue
        mid = _text(raw.get("id")) or f"m{index + 1}"
        attached, shown = _openwebui_files(raw, mid)
        reasoning, said = (
            openwebui_reasoning(_text(content)) if role == "assistant" else ("", content)
        )
        text = _with_placeholders(_text(said), shown)
        if not text.strip():
            if not attached:
                continue
            text = "\n".join(placeholder(_kind(f.mime), f.name) for f in attached)
        messages.append(
            ImportedMessage(
                id=mid,
                role=role,
                content=text,
                created_at=parse_time(raw.get("timestamp")),
                reasoning=reasoning or None,
            )
        )
        files.extend(attached)
    title = _title(item.get("title") or chat.get("title"))
    own_id = item.get("id") or chat.get("id")
    unique = _unique_ids(messages)
    params = chat.get("params")
    system = params.get("system") if isinstance(params, Mapping) else None
    if not isinstance(system, str):
        system = chat.get("system")  # older exports kept it beside the messages
    return ImportedConversation(
        source_key=_source_key(
            "openwebui", own_id, title, item.get("created_at"), (m.content for m in messages)
        ),
        id=_text(own_id),
        title=title,
        messages=unique,
        files=_files_of(files, messages, unique),
        pinned=bool(item.get("pinned")),
        created_at=parse_time(item.get("created_at") or chat.get("timestamp")),
        updated_at=parse_time(item.get("updated_at")),
        extra={"instructions": system.strip()}
        if isinstance(system, str) and system.strip()
        else {},
    )


# Open WebUI keeps a reasoning model's thinking in the answer's text, as folds before it:
# <details type="reasoning" done="true" duration="3">\n<summary>Thought for 3 seconds</summary>
# \n> a line of thinking\n</details>\n, then the answer.
_OPENWEBUI_REASONING = re.compile(r'\A\s*<details type="reasoning"[^>]*>(.*?)</details>\s*', re.S)
_SUMMARY = re.compile(r"\A\s*<summary>.*?</summary>", re.S)


def openwebui_reasoning(text: str) -> tuple[str, str]:
    """Open WebUI's answer text as (its thinking, the answer): the leading reasoning folds,
    their summary line and quote marks dropped."""
    thoughts: list[str] = []
    while match := _OPENWEBUI_REASONING.match(text):
        lines = _SUMMARY.sub("", match.group(1)).strip().splitlines()
        thoughts.append(
            "\n".join(
                line[2:] if line.startswith("> ") else line.lstrip(">") for line in lines
            ).strip()
        )
        text = text[match.end() :]
    return "\n\n".join(t for t in thoughts if t), text


_DATA_URL = re.compile(r"data:([\w.+-]+/[\w.+-]+)?(;[^,]*)?,", re.ASCII)


def _openwebui_files(raw: Mapping[str, Any], mid: str) -> tuple[list[ImportedFile], list[str]]:
    """A message's ``files``: an image inlined as a ``data:`` URL becomes an attachment;
    any other image or file (held on the server it came from) a placeholder."""
    attached: list[ImportedFile] = []
    shown: list[str] = []
    listed = raw.get("files")
    for index, entry in enumerate(listed if isinstance(listed, list) else []):
        if not isinstance(entry, Mapping):
            continue
        url = _text(entry.get("url"))
        inner = entry.get("file")
        name = _text(entry.get("name")) or (
            _text(inner.get("filename")) if isinstance(inner, Mapping) else ""
        )
        image = entry.get("type") == "image" or _is_image_name(name)
        inline = _data_url_bytes(url)
        if inline is None:
            if not name and url and not url.startswith("data:"):
                name = PurePosixPath(url.split("?", 1)[0]).name
            shown.append(placeholder("image" if image else "file", name))
            continue
        declared, data = inline
        mime = media_type(name, data, declared)
        if image or sniff(data) is not None:
            usable = usable_image(data)
            if usable is None:
                shown.append(placeholder("image", name))
                continue
            mime = usable
        extension = mimetypes.guess_extension(mime) or ""
        attached.append(
            ImportedFile(
                id=f"{mid}-file{index + 1}",
                name=name or f"{'image' if image else 'file'}-{index + 1}{extension}",
                content="",
                message_id=mid,
                mime=mime,
                data=data,
            )
        )
    return attached, shown


def _data_url_bytes(url: str) -> tuple[str | None, bytes] | None:
    match = _DATA_URL.match(url)
    if match is None or "base64" not in (match.group(2) or ""):
        return None
    try:
        return match.group(1), base64.b64decode(url[match.end() :], validate=True)
    except (binascii.Error, ValueError):
        return None


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
