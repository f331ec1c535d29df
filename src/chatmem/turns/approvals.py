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
from sqlalchemy import select, update
from sqlalchemy.orm import Session

from chatmem.errors import Conflict, NotFound
from chatmem.store.db import Database
from chatmem.store.tables.runs import ToolCallRow
from chatmem.store.types import utcnow
from chatmem.turns import runs
from chatmem.turns.dbwork import read, work

Decision = Literal["approved", "refused", "expired"]

#: How often a waiting turn reads its call's row (a decision taken on another replica).
POLL_SECONDS = 1.0


def decide(
    session: Session, user_id: str, run_id: str, call_id: str, decision: Decision
) -> dict[str, object]:
    """Records the user's answer to a waiting call of their run; answers the run's JSON.
    Repeating the same answer is harmless; a different or late one is a ``conflict``."""
    run = runs.owned_run(session, user_id, run_id)
    row = session.scalars(
        select(ToolCallRow)
        .where(ToolCallRow.run_id == run_id, ToolCallRow.call_id == call_id)
        .order_by(ToolCallRow.started_at.desc())
    ).first()
    if row is None:
        raise NotFound("tool call")
    claim = (
        update(ToolCallRow)
        .where(
            ToolCallRow.id == row.id,
            ToolCallRow.status == "waiting",
            ToolCallRow.decision.is_(None),
        )
        .values(decision=decision, decided_by=user_id, decided_at=utcnow())
    )
    taken = session.connection().execute(claim).rowcount
    if not taken:
        session.refresh(row)
        if row.decision != decision:
            raise Conflict("This tool call is not waiting for an answer any more.")
    session.flush()
    return runs.run_public(run)


def _decision(session: Session, row_id: str) -> str | None:
    return session.scalar(select(ToolCallRow.decision).where(ToolCallRow.id == row_id))


def _expire(session: Session, row_id: str) -> str | None:
    """No answer in time: ``expired``, unless an answer landed just now (then that one)."""
    session.execute(
        update(ToolCallRow)
        .where(ToolCallRow.id == row_id, ToolCallRow.decision.is_(None))
        .values(decision="expired", decided_at=utcnow())
    )
    return _decision(session, row_id)


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
                decision = await read(db, _decision, row_id)
                if decision is not None:
                    return cast(Decision, decision)
                left = deadline - time.monotonic()
                if left <= 0:
                    return cast(Decision, await work(db, _expire, row_id))
                with anyio.move_on_after(min(POLL_SECONDS, left)):
                    await event.wait()
        finally:
            self._events.pop(key, None)
