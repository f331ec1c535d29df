"""Switching which version of an answer or question is shown (PROJ-3), as the turn service
guards it: never while a turn or a compaction of the conversation runs (the history a turn
plans from must not change under it).  Regenerate and edit are turns: ``TurnService.redo``."""

from __future__ import annotations

from typing import Any

from chatmem.store import versions
from chatmem.store.conversations import owned_conversation_row
from chatmem.store.sessions import Session


def show_version(
    session: Session, user_id: str, conversation_id: str, message_id: str, index: int
) -> dict[str, Any]:
    """Shows version ``index`` of the slot of ``message_id`` (one unit of work, under the
    conversation's lock: :meth:`TurnService.switch_version`)."""
    conversation = owned_conversation_row(session, user_id, conversation_id)
    return versions.switch(session, conversation, message_id, index)
