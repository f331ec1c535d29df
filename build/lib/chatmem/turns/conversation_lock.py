"""One turn (or compaction, or edit of what a turn plans from) per conversation at a time.

The coordinator lock ``conversation:{id}`` is held for the whole of what runs inside
:func:`hold`: a run takes it over and holds it until it ends (:mod:`chatmem.turns.live_runs`).
The database row says which of a turn and a compaction holds it, for the right refusal
(``turn_running`` / ``compaction_running``).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Literal

from chatmem.errors import CompactionRunning, TurnRunning
from chatmem.store import runs
from chatmem.store.conversations import owned_conversation_row
from chatmem.store.db import Database
from chatmem.store.units import read
from chatmem.turns.coordinator import Coordinator

#: How long a lock lives unless its holder refreshes it (the heartbeat does, for runs).
LOCK_TTL = 60.0
#: What holds a conversation (:func:`hold`): a turn, an edit of what a turn plans from (a
#: version shown, the summary), or a compaction.
Purpose = Literal["turn", "edit", "compaction"]


def lock_name(conversation_id: str) -> str:
    return f"conversation:{conversation_id}"


@dataclass
class Held:
    """A conversation's lock, held inside :func:`hold`."""

    conversation_id: str
    #: The coordinator lock: (name, token).
    lock: tuple[str, str]
    #: Taken over by a run, which releases it when it ends.
    handed_over: bool = False


@contextlib.asynccontextmanager
async def hold(
    db: Database,
    coordinator: Coordinator,
    user_id: str,
    conversation_id: str,
    purpose: Purpose,
) -> AsyncIterator[Held]:
    """Holds the conversation's lock for what runs inside: taken on entry, released on
    exit — unless a run took it over (``handed_over``), which releases it when it ends.

    Busy, it refuses: ``not_found`` for somebody else's conversation (STORE-1, busy or
    not), else ``turn_running`` while a turn runs there (``compaction_running`` when the
    holder is a compaction), and ``compaction_running`` for a compaction whatever holds
    it."""
    name = lock_name(conversation_id)
    token = await coordinator.acquire(name, LOCK_TTL)
    if token is None:
        await read(db, owned_conversation_row, user_id, conversation_id)
        running = await read(db, runs.running_run, conversation_id)
        if running is not None and purpose != "compaction":
            raise TurnRunning()
        raise CompactionRunning()
    held = Held(conversation_id, (name, token))
    try:
        yield held
    finally:
        if not held.handed_over:
            await coordinator.release(name, token)
