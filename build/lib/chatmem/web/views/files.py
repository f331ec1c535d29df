"""The JSON of a conversation's file (CTX-16, PROV-4, PROJ-2): never a binary attachment's
bytes, only where the owner reads them (``content_url``)."""

from __future__ import annotations

from typing import Any

from chatmem.store.files import FileRecord
from chatmem.store.types import iso


def file_public(
    file: FileRecord,
    tokens_column: str = "tokens_estimate",
    status: str | None = None,
    *,
    content: bool = False,
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": file.id,
        "conversation_id": file.conversation_id,
        "message_id": file.message_id,
        "name": file.name,
        "state": file.state,
        "size": file.size,
        "tokens": getattr(file, tokens_column),
        "created_at": iso(file.created_at),
        # PROV-4: a binary attachment's media type (null for text); its bytes are at
        # ``content_url``, for the owner only.
        "mime": file.mime,
        "content_url": f"/api/v1/files/{file.id}/content",
        # PROJ-2: an image's size in pixels (null for anything else).
        "width": file.width,
        "height": file.height,
    }
    if status is not None:
        body["status"] = status
    if content:
        body["content"] = file.content
    return body
