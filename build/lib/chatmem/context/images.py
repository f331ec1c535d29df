"""Images in a request (PROJ-2): what they cost and how they are sent.

Theory of operation
-------------------
An image is a binary :class:`~chatmem.context.values.File` with its size in pixels
(:attr:`File.image`), attached to a message.  It *rides* with its message: when the message is
sent, so is the image, and a pair is taken into memory only if it fits with its images
(as auto files ride, CTX-16).  How it rides depends on the profile:

- ``accepts_images``: the message's content becomes parts — its text, then one ``image_url``
  part per image whose URL is :data:`IMAGE_REF` + the file id (the engine never sees bytes;
  the turn runner puts the data URL in place just before the request goes out).  The image
  costs :func:`image_tokens` and is counted in the plan's Images row.
- otherwise: a short placeholder (:data:`PLACEHOLDER`) is appended to the message's text and
  counted with the messages; the image is ``out_of_memory`` with the reason
  :data:`NOT_ACCEPTED`.

Costs follow the provider's published formula: OpenAI's tile formula for OpenAI models
(:func:`openai_tile_tokens`); a flat cost per image otherwise (``Profile.image_tokens``, or
:data:`DEFAULT_FLAT_TOKENS`).  An excluded image is never sent; an image not attached to a
message yet (an upload waiting for its question) rides with the draft, the question being
typed, and is not sent without one.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from chatmem.context.tokens import Tokenizer
from chatmem.context.values import File, Profile

#: The key of the images not attached to a message yet: they ride with the draft.
DRAFT = ""
#: The URL of an image part as planned: the runner replaces it with the image's data URL.
IMAGE_REF = "attachment:"
PLACEHOLDER = "[image: {name} — this model does not accept images]"

# Why an image is not sent (the plan's ``images`` map says it).
NOT_ACCEPTED = "this model does not accept images"
NOT_ATTACHED = "not attached to a message yet"
WINDOW_MODE = "the window mode sends text only"
MESSAGE_NOT_SENT = "its message is not in memory"
EXCLUDED = "excluded"  # by the user (the file's state)

# OpenAI's published formula for high detail: fit within 2048 x 2048, scale the shortest
# side down to 768, then 85 tokens plus 170 per 512-pixel tile; "low" detail is 85 flat.
TILE_BASE = 85
TILE_TOKENS = 170
TILE_SIZE = 512
FIT_SIDE = 2048
SHORT_SIDE = 768
LOW_DETAIL_TOKENS = 85
#: Per image when the provider's formula is not known (Anthropic's is about 1,600 for an
#: image of a megapixel or more; Gemini's 258 per tile): a conservative guess.
DEFAULT_FLAT_TOKENS = 1_600
#: Model names that take OpenAI's formula.
OPENAI_PREFIXES = ("gpt-", "chatgpt", "o1", "o3", "o4", "openai/")


def openai_tile_tokens(width: int, height: int, detail: str = "high") -> int:
    """OpenAI's cost of one image (``detail`` ``low``: 85; ``auto`` is counted as high)."""
    if detail == "low":
        return LOW_DETAIL_TOKENS
    w, h = float(width), float(height)
    fit = min(1.0, FIT_SIDE / max(w, h))
    w, h = w * fit, h * fit
    short = min(1.0, SHORT_SIDE / min(w, h))
    w, h = w * short, h * short
    tiles = math.ceil(w / TILE_SIZE) * math.ceil(h / TILE_SIZE)
    return TILE_BASE + TILE_TOKENS * tiles


def uses_tiles(profile: Profile) -> bool:
    """Whether the profile's model is counted with OpenAI's formula: an OpenAI model name,
    or no model at all (the default profile) unless a flat cost is set."""
    if profile.image_tokens is not None:
        return False
    model = (profile.model or "").lower()
    return not model or model.startswith(OPENAI_PREFIXES)


def image_tokens(file: File, profile: Profile) -> int:
    """What one image costs the profile's model."""
    if uses_tiles(profile):
        return openai_tile_tokens(file.width or 1, file.height or 1)
    return profile.image_tokens if profile.image_tokens is not None else DEFAULT_FLAT_TOKENS


@dataclass(frozen=True)
class Rider:
    """An image riding with its message: the tokens it adds and how it is sent."""

    file: File
    tokens: int
    #: An ``image_url`` part (the profile takes images), else None (the placeholder).
    part: Mapping[str, Any] | None
    placeholder: str = ""


def riders(files: Sequence[File], profile: Profile, tokenizer: Tokenizer) -> dict[str, list[Rider]]:
    """Message id -> the images riding with it; :data:`DRAFT` -> those not attached to a
    message yet (they go with the draft).  Excluded images ride nowhere."""
    out: dict[str, list[Rider]] = {}
    for f in files:
        if not f.image or f.state == "excluded":
            continue
        if profile.accepts_images:
            part = {"type": "image_url", "image_url": {"url": IMAGE_REF + f.id}}
            rider = Rider(f, image_tokens(f, profile), part)
        else:
            text = PLACEHOLDER.format(name=f.name)
            rider = Rider(f, tokenizer.count("\n\n" + text), None, text)
        out.setdefault(f.message_id or DRAFT, []).append(rider)
    return out


def with_riders(content: str, attached: Sequence[Rider], role: str) -> str | list[Any]:
    """A message's content with its images: parts when it is a question and images are
    sent (other roles cannot carry image parts: they get the placeholder), else text."""
    parts = [r.part for r in attached if r.part is not None and role == "user"]
    texts = [r.placeholder or PLACEHOLDER.format(name=r.file.name) for r in attached]
    if not parts:
        return "\n\n".join([content, *texts]) if content else "\n\n".join(texts)
    out: list[Any] = [{"type": "text", "text": content}] if content else []
    out.extend(dict(p) for p in parts)
    return out


def rider_tokens(by_message: Mapping[str, Sequence[Rider]]) -> dict[str, int]:
    return {mid: sum(r.tokens for r in attached) for mid, attached in by_message.items()}
