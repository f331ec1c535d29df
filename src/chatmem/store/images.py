"""Images attached to messages (PROJ-2): checked by their bytes, stored beside the message.

An image is a binary file of its conversation (``files`` row: ``mime``, ``data``, ``width``,
``height``; no text), like a tool's attachment (PROV-4): the message text never holds it.
What it is comes from the bytes, never from a declared content type or a file name: the
magic number must be PNG, JPEG, GIF or WebP and Pillow must read the size from the header.
The size in pixels is stored so a plan can count the image's tokens (the provider's
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
import io
import warnings
from collections.abc import Sequence
from dataclasses import dataclass

from PIL import Image, UnidentifiedImageError
from sqlalchemy import Connection, select
from sqlalchemy.orm import Session

from chatmem.errors import InvalidInput, NotFound, PayloadTooLarge
from chatmem.store.db import connection_of
from chatmem.store.tables.conversations import Conversation, File, Message
from chatmem.store.token_counts import counts_for_text
from chatmem.store.types import new_id, utcnow

#: Largest image stored, in bytes (the bound OpenAI and Anthropic put on one image is 20 MB
#: and 5 MB; a request carries it base64-encoded, a third larger).
DEFAULT_MAX_IMAGE_BYTES = 5 * 1024 * 1024
#: Largest image in pixels: anything bigger is refused before it is decoded (a small file
#: can declare a huge canvas).
MAX_IMAGE_PIXELS = 50_000_000
MAX_NAME = 500

#: The formats accepted, by their magic numbers (offset, bytes) and Pillow's format name.
FORMATS: dict[str, str] = {
    "PNG": "image/png",
    "JPEG": "image/jpeg",
    "GIF": "image/gif",
    "WEBP": "image/webp",
}
_MAGIC: tuple[tuple[int, bytes, str], ...] = (
    (0, b"\x89PNG\r\n\x1a\n", "PNG"),
    (0, b"\xff\xd8\xff", "JPEG"),
    (0, b"GIF87a", "GIF"),
    (0, b"GIF89a", "GIF"),
    (8, b"WEBP", "WEBP"),  # after b"RIFF" and the chunk size
)
EXTENSIONS = {"image/png": ".png", "image/jpeg": ".jpg", "image/gif": ".gif", "image/webp": ".webp"}


@dataclass(frozen=True)
class ImageInfo:
    """What the bytes say: the media type and the size in pixels."""

    mime: str
    width: int
    height: int


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


def sniff(data: bytes) -> str | None:
    """The format the magic number names (Pillow's name), or None."""
    for offset, magic, name in _MAGIC:
        if data[offset : offset + len(magic)] == magic and (name != "WEBP" or data[:4] == b"RIFF"):
            return name
    return None


def inspect_image(data: bytes, *, max_bytes: int = DEFAULT_MAX_IMAGE_BYTES) -> ImageInfo:
    """The image's type and size from its bytes; ``InvalidInput`` unless they are a PNG,
    JPEG, GIF or WebP whose header Pillow reads, ``PayloadTooLarge`` above ``max_bytes``."""
    if len(data) > max_bytes:
        raise PayloadTooLarge(
            f"The image is larger than {max_bytes // 1024} KB.", size=len(data), limit=max_bytes
        )
    expected = sniff(data)
    if expected is None:
        raise InvalidInput("Only PNG, JPEG, GIF and WebP images can be attached.")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(io.BytesIO(data), formats=[expected]) as image:
                width, height = image.size
    except (UnidentifiedImageError, OSError, ValueError, SyntaxError, EOFError) as exc:
        raise InvalidInput(f"The file is not a readable {expected} image.") from exc
    except (Image.DecompressionBombWarning, Image.DecompressionBombError):
        raise InvalidInput("The image has too many pixels.") from None
    if width < 1 or height < 1 or width * height > MAX_IMAGE_PIXELS:
        raise InvalidInput(f"An image has 1 to {MAX_IMAGE_PIXELS:,} pixels.")
    return ImageInfo(FORMATS[expected], width, height)


def is_image(data: bytes, declared: str | None = None) -> bool:
    """Whether an upload is meant as an image: its magic number says so, or it was declared
    ``image/…`` (then :func:`inspect_image` refuses it when the bytes disagree)."""
    declared = (declared or "").split(";", 1)[0].strip().lower()
    return sniff(data) is not None or declared.startswith("image/")


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


def image_size(data: bytes | None, mime: str | None) -> tuple[int | None, int | None]:
    """Width and height of stored image bytes (an import or a restore recomputes them);
    ``(None, None)`` for anything that is not an image of an accepted type."""
    if data is None or mime not in EXTENSIONS:
        return None, None
    try:
        info = inspect_image(data, max_bytes=len(data))
    except (InvalidInput, PayloadTooLarge):
        return None, None
    return info.width, info.height


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
