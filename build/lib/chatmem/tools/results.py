"""What a tool's result becomes in the conversation (PROV-4): text for the model, and binary
content stored as attachments of the tool message.

An MCP result is a list of content blocks: text, images and audio (base64 ``data`` with a
``mimeType``), embedded resources (a ``text`` or a base64 ``blob``) and resource links.  Text
stays text.  An image, audio or blob is decoded and kept as a file of the tool message — its
bytes and media type, served to the owner by ``GET /api/v1/files/{id}/content`` — and the tool
message carries a short placeholder in its place::

    [image/png, 5.4 KB, attached as file get_image.png]

so a model is never sent base64 as text (a 5 KB image is some 2,000 tokens of noise, issue
11).  The model gets the placeholder, whatever the profile: only images attached to a
question are sent as image parts (PROJ-2, ``chatmem.context.images``).  An attachment larger than the
answer and tool-result bound (``CHATMEM_MAX_ANSWER_BYTES``, PROV-5) is not kept; its
placeholder says so.
"""

from __future__ import annotations

import base64
import binascii
import json
import mimetypes
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from chatmem.settings import Settings
from chatmem.store.files import add_attachments
from chatmem.store.messages import store_message
from chatmem.store.sessions import Session

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
#: Extensions for media types the platform's table may not know (or names oddly).
_EXTENSIONS = {
    "image/png": ".png",
    "image/jpeg": ".jpg",
    "image/gif": ".gif",
    "image/webp": ".webp",
    "image/svg+xml": ".svg",
    "audio/wav": ".wav",
    "audio/x-wav": ".wav",
    "audio/mpeg": ".mp3",
    "audio/ogg": ".ogg",
    "application/pdf": ".pdf",
}


@dataclass(frozen=True)
class ToolAttachment:
    """A binary part of a tool result, and the placeholder that stands for it in the text."""

    name: str
    mime: str
    data: bytes = field(repr=False)
    placeholder: str = ""


@dataclass(frozen=True)
class ToolContent:
    text: str
    attachments: tuple[ToolAttachment, ...] = ()


def human_size(size: int) -> str:
    if size >= 1024 * 1024:
        return f"{size / (1024 * 1024):.1f} MB"
    if size >= 1024:
        return f"{size / 1024:.1f} KB"
    return f"{size} bytes"


def placeholder(mime: str, size: int, name: str) -> str:
    return f"[{mime}, {human_size(size)}, attached as file {name}]"


def _field(block: Any, *names: str) -> Any:
    for name in names:
        value = block.get(name) if isinstance(block, dict) else getattr(block, name, None)
        if value is not None:
            return value
    return None


def _dump(block: Any) -> str:
    dump = block.model_dump(mode="json") if hasattr(block, "model_dump") else block
    return dump if isinstance(dump, str) else json.dumps(dump, ensure_ascii=False, default=str)


class _Names:
    """File names for one result's attachments: the tool's name (or the resource's), unique."""

    def __init__(self, tool: str) -> None:
        self.stem = _UNSAFE.sub("_", tool).strip("._") or "tool"
        self.taken: set[str] = set()

    def __call__(self, mime: str, uri: str | None = None) -> str:
        base = ""
        if uri:
            last = uri.rstrip("/").rsplit("/", 1)[-1].split("?", 1)[0]
            base = _UNSAFE.sub("_", last).strip("._")
        if not base or "." not in base:
            kind = mime.split(";", 1)[0].strip().lower()
            extension = _EXTENSIONS.get(kind) or mimetypes.guess_extension(kind) or ".bin"
            base = f"{base or self.stem}{extension}"
        stem, dot, extension = base.rpartition(".")
        name, n = base, 1
        while name in self.taken:
            n += 1
            name = f"{stem}-{n}{dot}{extension}"
        self.taken.add(name)
        return name[:200]


def tool_content(result: Any, tool: str) -> ToolContent:
    """The text of an MCP tool result for the tool message, with its binary parts pulled out
    as attachments (each replaced by its placeholder, in place)."""
    names = _Names(tool)
    parts: list[str] = []
    attachments: list[ToolAttachment] = []

    def binary(encoded: Any, mime: Any, uri: str | None = None) -> None:
        mime = str(mime or "application/octet-stream")
        try:
            data = base64.b64decode(str(encoded), validate=True)
        except (binascii.Error, ValueError):
            parts.append(f"[{mime}: the tool sent data that is not valid base64; not kept]")
            return
        name = names(mime, uri)
        text = placeholder(mime, len(data), name)
        attachments.append(ToolAttachment(name, mime, data, text))
        parts.append(text)

    for block in _field(result, "content") or []:
        kind = _field(block, "type")
        text = _field(block, "text")
        if isinstance(text, str) and kind in (None, "text"):
            parts.append(text)
        elif kind in ("image", "audio") and _field(block, "data") is not None:
            binary(_field(block, "data"), _field(block, "mime_type", "mimeType"))
        elif kind == "resource" and _field(block, "resource") is not None:
            resource = _field(block, "resource")
            uri = _field(resource, "uri")
            mime = _field(resource, "mime_type", "mimeType")
            if _field(resource, "blob") is not None:
                binary(_field(resource, "blob"), mime, str(uri) if uri else None)
            elif isinstance(_field(resource, "text"), str):
                parts.append(str(_field(resource, "text")))
            else:
                parts.append(_dump(block))
        else:
            parts.append(_dump(block))
    structured = _field(result, "structured_content", "structuredContent")
    if not parts and structured is not None:
        parts.append(json.dumps(structured, ensure_ascii=False))
    return ToolContent("\n".join(parts), tuple(attachments))


#: Fields of the SDK's results that are its own wire bookkeeping, not what a server said.
_SDK_FIELDS = {"result_type", "ttl_ms", "cache_scope"}


def whole_result(result: Any) -> dict[str, Any] | None:
    """A result (``CallToolResult``, ``ReadResourceResult``) as JSON, the way the server sent
    it (``content``, ``structuredContent``, ``isError``, ``_meta`` …); None for a value that
    is not one."""
    if not hasattr(result, "model_dump"):
        return None
    dumped = result.model_dump(mode="json", by_alias=True, exclude_none=True, exclude=_SDK_FIELDS)
    return dumped if isinstance(dumped, dict) else None


def kept_result(result: dict[str, Any] | None, max_bytes: int | None) -> dict[str, Any] | None:
    """PROV-5 for the whole result (APPS-1): kept when its JSON is within ``max_bytes``."""
    if result is None or max_bytes is None:
        return result
    size = len(json.dumps(result, ensure_ascii=False, separators=(",", ":")).encode("utf-8"))
    return result if size <= max_bytes else None


#: Appended to a tool result cut at the size bound (PROV-5); it counts toward the bound.
TOOL_RESULT_CUT = "\n[… tool result cut at {limit} bytes: it had {size} bytes …]"


def utf8_size(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


def utf8_prefix(text: str, size: int) -> str:
    """The longest prefix of ``text`` of at most ``size`` UTF-8 bytes (whole characters)."""
    if size <= 0:
        return ""
    return text.encode("utf-8", "surrogatepass")[:size].decode("utf-8", "ignore")


def bound_tool_result(text: str, limit: int) -> tuple[str, bool]:
    """PROV-5: a tool result cut to at most ``limit`` UTF-8 bytes, marker included, and
    whether it was cut.  What is kept is the result's beginning."""
    size = utf8_size(text)
    if size <= limit:
        return text, False
    marker = TOOL_RESULT_CUT.format(limit=limit, size=size)
    return utf8_prefix(text, limit - utf8_size(marker)) + marker, True


def bounded(
    text: str, attachments: Sequence[ToolAttachment], max_bytes: int | None
) -> tuple[str, tuple[ToolAttachment, ...]]:
    """PROV-5: attachments past ``max_bytes`` are not kept; their placeholder says so."""
    kept: list[ToolAttachment] = []
    for attachment in attachments:
        if max_bytes is not None and len(attachment.data) > max_bytes:
            text = text.replace(
                attachment.placeholder,
                f"[{attachment.mime}, {human_size(len(attachment.data))}: larger than the "
                f"{human_size(max_bytes)} this server keeps; not kept]",
                1,
            )
        else:
            kept.append(attachment)
    return text, tuple(kept)


def store_tool_message(
    session: Session,
    conversation_id: str,
    content: str,
    settings: Settings,
    meta: dict[str, Any],
    extra: dict[str, Any],
    attachments: Sequence[ToolAttachment],
) -> tuple[str, list[dict[str, Any]]]:
    """The tool message and its attachments, in one transaction (the placeholder never
    names a file that was not stored)."""
    message_id = store_message(session, conversation_id, "tool", content, settings, meta, extra)
    return message_id, add_attachments(session, conversation_id, message_id, attachments)
