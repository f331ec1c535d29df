"""Switching which version of an answer or question is shown (PROJ-3), as the turn service
guards it: never while a turn or a compaction of the conversation runs (the history a turn
plans from must not change under it).  Regenerate and edit are turns: ``TurnService.submit``
with a ``Redo``."""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session

from chatmem.store import versions
from chatmem.store.conversations import owned_conversation_row
from chatmem.turns.service import TurnService, lock_name


def _switch(
    session: Session, user_id: str, conversation_id: str, message_id: str, index: int
) -> dict[str, Any]:
    conversation = owned_conversation_row(session, user_id, conversation_id)
    return versions.switch(session, conversation, message_id, index)


async def switch_version(
    service: TurnService, user_id: str, conversation_id: str, message_id: str, index: int
) -> dict[str, Any]:
    """Shows version ``index`` of the slot of ``message_id``; 409 ``turn_running`` (or
    ``compaction_running``) while the conversation is busy."""
    await service._read(owned_conversation_row, user_id, conversation_id)
    token = await service._take_lock(user_id, conversation_id, for_turn=True)
    try:
        return await service._db(_switch, user_id, conversation_id, message_id, index)
    finally:
        await service.coordinator.release(lock_name(conversation_id), token)
