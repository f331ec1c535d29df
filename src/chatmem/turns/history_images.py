"""The images of a chat history's new user messages (issue 29), stored as the UI's are.

A user message sent to ``/v1/chat/completions`` with ``image_url`` parts keeps its text as the
message and each image as an image file of the message (:func:`chatmem.store.images.add_image`:
checked by its bytes, bounded by ``max_image_bytes``) — the same rows an upload from the UI
makes, so the plan sends them as image parts and counts them in its Images row (PROJ-2).
The question being asked rides as the UI's does: its images are stored loose first and
attached by its admission (``file_ids``).  A model profile that takes no images refuses them
(:func:`check_accepted`): the client is told, not answered about a placeholder.
"""

from __future__ import annotations

from collections.abc import Sequence

from chatmem.errors import InvalidInput
from chatmem.settings import Settings
from chatmem.store.images import add_image
from chatmem.store.sessions import Session
from chatmem.turns.history_match import Said
from chatmem.turns.inputs import TurnInputs


def store_images(
    session: Session,
    settings: Settings,
    user_id: str,
    conversation_id: str,
    said: Said,
    message_id: str | None,
) -> list[str]:
    """Stores ``said``'s images as files of the message ``message_id`` (None: loose, for the
    admission to attach); their ids."""
    return [
        add_image(
            session,
            user_id=user_id,
            conversation_id=conversation_id,
            message_id=message_id,
            filename=None,
            data=data,
            max_bytes=settings.max_image_bytes,
        ).id
        for data in said.images
    ]


def check_accepted(messages: Sequence[Said], inputs: TurnInputs, model: str) -> None:
    """Refuses a request holding images when the profile that answers takes none."""
    if any(said.images for said in messages) and not inputs.profile.accepts_images:
        raise InvalidInput(
            f"messages: the model {model!r} takes no images (its profile does not accept "
            "images); send text, or choose a model whose profile accepts images",
            param="messages",
        )
