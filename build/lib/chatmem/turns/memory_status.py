"""A conversation's memory status (CTX-14, CTX-16): what the next request would carry.

The history page shows each message's and file's status for the next request with an empty
draft, planned in the conversation's mode with its engine profile: the records come from
:func:`chatmem.store.engine.load_engine_conversation`, the plan from the engine, and the
counts are displayed from the tokens column of the profile's tokenizer.
"""

from __future__ import annotations

from typing import Protocol, cast

from chatmem.context import Mode, Profile, plan
from chatmem.store.engine import load_engine_conversation
from chatmem.store.sessions import Session
from chatmem.store.token_counts import column_for


class PlannedConversation(Protocol):
    """What the status needs of a stored conversation."""

    @property
    def id(self) -> str: ...
    @property
    def instructions(self) -> str: ...
    @property
    def project_id(self) -> str | None: ...
    @property
    def mode(self) -> str: ...


def memory_status(
    session: Session, conversation: PlannedConversation, profile: Profile
) -> tuple[dict[str, str], dict[str, str], str]:
    """Each message's and file's status for the next request (empty draft) planned with
    ``profile`` (the conversation's engine profile), and the tokens column of the profile's
    tokenizer (for displaying counts)."""
    value = load_engine_conversation(
        session,
        conversation.id,
        tokenizer=profile.tokenizer,
        instructions=conversation.instructions,
        project_id=conversation.project_id,
    )
    result = plan(value, profile, mode=cast(Mode, conversation.mode))
    return dict(result.status), dict(result.files), column_for(profile.tokenizer)
