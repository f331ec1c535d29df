"""Image parts of a ``/v1/chat/completions`` message (issue 29): data URLs only.

An ``image_url`` part must carry the image itself as a ``data:image/…;base64,…`` URL (what the
``openai`` SDK's examples, LangChain and Open WebUI send).  A remote ``https://`` URL is
refused with a 400 rather than fetched: fetching would make chatmem's server open any URL a
token holder names (SSRF) and wait on it inside the turn's admission; the client already
holds the image and can send its bytes.  The bytes are checked where they are stored
(:func:`chatmem.store.images.add_image`: PNG, JPEG, GIF or WebP, within
``max_image_bytes``), exactly as an upload from the UI.
"""

from __future__ import annotations

import base64
import binascii
import re

from chatmem.errors import InvalidInput

#: ``data:<type>[;params];base64,<data>``
DATA_URL = re.compile(r"^data:(?P<mime>[\w.+-]+/[\w.+-]+)(?:;[^,;]*)*;base64,(?P<data>.*)$", re.S)
EXAMPLE = "data:image/png;base64,…"


def image_bytes(url: str) -> bytes:
    """The image a part's URL carries; ``InvalidInput`` for a remote URL or a bad data URL."""
    if url.startswith(("http://", "https://")):
        raise InvalidInput(
            "messages: image URLs are not fetched by chatmem; send the image itself as a "
            f"data URL ({EXAMPLE})",
            param="messages",
        )
    found = DATA_URL.match(url)
    if found is None:
        raise InvalidInput(
            f"messages: an image_url must be a base64 data URL ({EXAMPLE})", param="messages"
        )
    if not found["mime"].lower().startswith("image/"):
        raise InvalidInput(
            f"messages: the data URL holds {found['mime']}, not an image", param="messages"
        )
    try:
        data = base64.b64decode(found["data"].strip(), validate=True)
    except (binascii.Error, ValueError):
        raise InvalidInput(
            "messages: the image's data URL is not valid base64", param="messages"
        ) from None
    if not data:
        raise InvalidInput("messages: the image's data URL is empty", param="messages")
    return data
