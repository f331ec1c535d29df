"""What an image is, read from its bytes alone (PROJ-2): never from a declared content type or
a file name. The magic number must be PNG, JPEG, GIF or WebP and Pillow must read the size
from the header; the size in pixels lets a plan count the image's tokens without the bytes.
Pure: the uploads, the importers and ``store.images`` (which stores one) all ask here."""

from __future__ import annotations

import io
import warnings
from dataclasses import dataclass

from PIL import Image, UnidentifiedImageError

from chatmem.errors import InvalidInput, PayloadTooLarge

#: Largest image stored, in bytes (the bound OpenAI and Anthropic put on one image is 20 MB
#: and 5 MB; a request carries it base64-encoded, a third larger).
DEFAULT_MAX_IMAGE_BYTES = 5 * 1024 * 1024
#: Largest image in pixels: anything bigger is refused before it is decoded (a small file
#: can declare a huge canvas).
MAX_IMAGE_PIXELS = 50_000_000

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
