"""'Ask first' tool calls (PROV-6): the turn waits; the user approves or refuses.

An administrator marks some tools of an MCP server "ask first".  When the model calls one,
the runner records the call ``waiting``, shows it (the run's ``waiting`` field and an
``approval`` event) and waits — the run stays ``running``.  The user's answer is durable: it
is written on the call's row by one conditional update (only a row still ``waiting``, with
no decision yet, takes one), so two clicks, two tabs or two replicas agree on a single
answer, and an answer that comes too late (the turn was stopped, or the wait expired) is
refused with ``conflict``.

The runner learns the answer from a local event, set by the turn service when the decision
was taken in this process, and otherwise reads the row every :data:`POLL_SECONDS` (a
decision taken on another replica).  Past the approval timeout the call counts as refused
(decision ``expired``).
"""

from __future__ import annotations

import asyncio
import time
from typing import Literal, cast

import anyio

from chatmem.store import tool_calls
from chatmem.store.db import Database
from chatmem.store.runs import RunRecord
from chatmem.store.sessions import Session
from chatmem.store.units import read, work

Decision = Literal["approved", "refused", "expired"]

#: How often a waiting turn reads its call's row (a decision taken on another replica).
POLL_SECONDS = 1.0


def decide(
    session: Session, user_id: str, run_id: str, call_id: str, decision: Decision
) -> RunRecord:
    """Records the user's answer to a waiting call of their run; answers the run.
    Repeating the same answer is harmless; a different or late one is a ``conflict``."""
    return tool_calls.record_decision(session, user_id, run_id, call_id, decision)


class Approvals:
    """The local wake-ups of waiting turns (one process); the rows hold the answers."""

    def __init__(self) -> None:
        self._events: dict[tuple[str, str], asyncio.Event] = {}

    def nudge(self, run_id: str, call_id: str) -> None:
        event = self._events.get((run_id, call_id))
        if event is not None:
            event.set()

    async def wait(
        self, db: Database, run_id: str, call_id: str, row_id: str, timeout: float
    ) -> Decision:
        """Waits for the answer to the call recorded as ``row_id``."""
        key = (run_id, call_id)
        event = self._events.setdefault(key, asyncio.Event())
        deadline = time.monotonic() + timeout
        try:
            while True:
                event.clear()
                decision = await read(db, tool_calls.tool_decision, row_id)
                if decision is not None:
                    return cast(Decision, decision)
                left = deadline - time.monotonic()
                if left <= 0:
                    return cast(Decision, await work(db, tool_calls.expire_decision, row_id))
                with anyio.move_on_after(min(POLL_SECONDS, left)):
                    await event.wait()
        finally:
            self._events.pop(key, None)
