"""Images attached to messages (PROJ-2): checked by their bytes, stored beside the message.

An image is a binary file of its conversation (``files`` row: ``mime``, ``data``, ``width``,
``height``; no text), like a tool's attachment (PROV-4): the message text never holds it.
What it is comes from the bytes alone (:mod:`chatmem.formats.images`, pure: the magic
number and Pillow's reading of the header). The size in pixels is stored so a plan can count the image's tokens (the provider's
formula, ``chatmem.context.images``) without loading the bytes.

:func:`add_image` is the one way to store one — uploads and importers (ChatGPT/Claude ZIP
exports holding image bytes) call it::

    record = add_image(session, user_id=user.id, conversation_id=cid,
                       message_id=mid, filename="chart.png", data=raw)

``message_id`` None keeps the image loose in the conversation until a turn takes it
(``POST …/turns`` with ``file_ids``).  Bad bytes raise ``InvalidInput``; more than
``max_bytes`` raises ``PayloadTooLarge``; a conversation or message the user does not own
raises ``NotFound`` (STORE-1).  The caller commits.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import Connection, select
from sqlalchemy.orm import Session

from chatmem.errors import InvalidInput, NotFound
from chatmem.formats.images import (
    DEFAULT_MAX_IMAGE_BYTES,
    EXTENSIONS,
    inspect_image,
)
from chatmem.store.db import connection_of
from chatmem.store.tables.conversations import Conversation, File, Message
from chatmem.store.token_counts import counts_for_text
from chatmem.store.types import new_id, utcnow

MAX_NAME = 500


@dataclass(frozen=True)
class ImageRecord:
    """A stored image (its public description)."""

    id: str
    conversation_id: str
    message_id: str | None
    name: str
    mime: str
    size: int
    width: int
    height: int


def _name(filename: str | None, mime: str) -> str:
    name = (filename or "").strip().replace("\x00", "")
    if not name:
        name = "image" + EXTENSIONS[mime]
    if len(name) > MAX_NAME:
        raise InvalidInput(f"A file name is 1 to {MAX_NAME} characters.")
    return name


def add_image(
    session: Session,
    *,
    user_id: str,
    conversation_id: str,
    message_id: str | None,
    filename: str | None,
    data: bytes,
    max_bytes: int = DEFAULT_MAX_IMAGE_BYTES,
) -> ImageRecord:
    """Check ``data`` (:func:`inspect_image`) and store it as an image of the message (or
    loose in the conversation when ``message_id`` is None).  The conversation must be the
    user's and live (not archived); the message must be in it."""
    conversation = session.get(Conversation, conversation_id)
    if (
        conversation is None
        or conversation.user_id != user_id
        or conversation.archived_at is not None
    ):
        raise NotFound("conversation")
    if message_id is not None:
        found = session.scalar(
            select(Message.id).where(
                Message.id == message_id, Message.conversation_id == conversation_id
            )
        )
        if found is None:
            raise NotFound("message")
    info = inspect_image(data, max_bytes=max_bytes)
    name = _name(filename, info.mime)
    row = File(
        id=new_id(),
        conversation_id=conversation_id,
        message_id=message_id,
        name=name,
        content="",
        state="auto",
        size=len(data),
        mime=info.mime,
        data=data,
        width=info.width,
        height=info.height,
        created_at=utcnow(),
        **counts_for_text(""),
    )
    session.add(row)
    conversation.updated_at = utcnow()
    session.flush()
    return ImageRecord(
        id=row.id,
        conversation_id=conversation_id,
        message_id=message_id,
        name=name,
        mime=info.mime,
        size=len(data),
        width=info.width,
        height=info.height,
    )


def data_urls(session: Session | Connection, file_ids: Sequence[str]) -> dict[str, str]:
    """``data:`` URLs (base64) of the images with these ids, for a request to a model that
    takes images (PROJ-2); ids that are not images are left out."""
    if not file_ids:
        return {}
    rows = connection_of(session).execute(
        select(File.id, File.mime, File.data).where(
            File.id.in_(list(file_ids)), File.mime.in_(list(EXTENSIONS)), File.data.is_not(None)
        )
    )
    return {
        row.id: f"data:{row.mime};base64,{base64.b64encode(row.data).decode('ascii')}"
        for row in rows
    }
