"""A turn's tool calls, after the model asked for them: each recorded before it is made
(TURN-3), approved first when its server says "ask first" (PROV-6), made through the
toolbox with Stop raced against it, and its result stored as a ``tool`` message and shown
(``tool_call`` and ``tool_result`` events).  Every requested call gets a result, also the
ones the per-turn limit (TURN-4) or Stop left unmade (CTX-20).  Client tools are shown and
handed back instead (``turns.client_tools``).  :class:`~chatmem.turns.runner.TurnRunner`
makes one :class:`ToolSteps` per turn and shares its tally with it."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from chatmem.context.values import ToolCall
from chatmem.settings import Settings
from chatmem.store import runs, tool_calls
from chatmem.store.db import Database
from chatmem.store.types import new_id
from chatmem.store.units import work
from chatmem.tools.approvals import Approvals
from chatmem.tools.results import (
    ToolAttachment,
    bound_tool_result,
    bounded,
    kept_result,
    store_tool_message,
)
from chatmem.tools.toolbox import ToolBox, ToolOutcome, ToolRoute
from chatmem.turns import events
from chatmem.turns.journal import EventJournal

T = TypeVar("T")

UNKNOWN_RESULT = (
    "The result of this tool call is unknown: the turn was {why} while it ran. It was not "
    "repeated automatically."
)
NOT_RUN = "Not run: the per-turn limit of {limit} tool calls was reached."
NOT_MADE = "Not run: the turn was {why} before this tool call was made."
REFUSED = "Not run: the user refused this tool call."
NOT_ANSWERED = "Not run: the user did not approve this tool call in time."


class RaceStop(Protocol):
    """Awaits ``awaitable`` unless the turn's stop signal fires first (then :class:`Stopped`)."""

    def __call__(self, awaitable: Awaitable[T], /) -> Awaitable[T]: ...


class Stopped(Exception):
    """Raised inside the turn when the stop signal fires."""


@dataclass
class Tally:
    """What a turn has done so far: its model requests and tool calls (the guard's counts,
    TURN-4), its last message, why its last answer was cut, its usage and cost."""

    iterations: int = 0
    tool_calls: int = 0
    last_message_id: str | None = None
    #: Why the last answer ended when it was not its own choice: ``length`` (the model's
    #: output limit), ``content_filter`` (the provider's filter).
    cut: str | None = None
    usage: dict[str, int] = field(
        default_factory=lambda: {"prompt_tokens": 0, "completion_tokens": 0}
    )
    cost: float = 0.0


class ToolSteps:
    """The tool calls of one turn (``run_id`` in ``conversation_id``, ``user_id``'s).
    ``store`` writes one of the turn's messages; ``race_stop`` awaits unless Stop comes first
    (then raises :class:`Stopped`)."""

    def __init__(
        self,
        *,
        run_id: str,
        conversation_id: str,
        user_id: str,
        db: Database,
        settings: Settings,
        journal: EventJournal,
        approvals: Approvals,
        tally: Tally,
        store: Callable[..., Awaitable[str]],
        race_stop: RaceStop,
    ) -> None:
        self._run_id = run_id
        self._conversation_id = conversation_id
        self._user_id = user_id
        self._db = db
        self._settings = settings
        self._journal = journal
        self._approvals = approvals
        self._tally = tally
        self._store = store
        self._race_stop = race_stop

    async def make(self, toolbox: ToolBox, calls: list[ToolCall]) -> bool:
        """Makes the requested calls; False when the guard stopped some of them."""
        limit = self._settings.turn_max_tool_calls
        for index, call in enumerate(calls):
            if self._tally.tool_calls >= limit:
                for skipped in calls[index:]:
                    await self._result(skipped, NOT_RUN.format(limit=limit), "failed", None)
                return False
            self._tally.tool_calls += 1
            try:
                await self._tool(toolbox, call)
            except Stopped:
                # Every call gets its result (CTX-20): the ones after it were never made.
                for rest in calls[index + 1 :]:
                    await self._result(rest, NOT_MADE.format(why="stopped"), "not_run", None)
                raise
        return True

    async def hand_back(self, calls: list[ToolCall]) -> None:
        """The client's own tools (``turns.client_tools``): shown, not made; the turn ends
        and the client sends the results with its next request."""
        for call in calls:
            await self._show(call, server=None, client=True)

    async def _show(self, call: ToolCall, **where: Any) -> None:
        """The call as the model asked for it (a ``tool_call`` event under the turn's last
        message); ``where``: whose tool it is (its server, its app, or the client's)."""
        await self._journal.emit(
            events.ToolCall,
            id=call.id,
            name=call.name,
            arguments=call.arguments,
            message_id=self._tally.last_message_id,
            **where,
        )

    async def _tool(self, toolbox: ToolBox, call: ToolCall) -> None:
        """One call: recorded before it is made (TURN-3), approved first when the server's
        policy says so (PROV-6), made through the server's link, its result stored — the
        text the model reads, and the whole result for the tool's app (APPS-1)."""
        route = toolbox.route(call.name)
        row_id = new_id()
        await self._show(
            call,
            server=route.server_name if route else None,
            tool_call_id=row_id,
            app=route.shown_app if route else None,
        )
        ask = route is not None and route.ask_first
        await work(
            self._db,
            tool_calls.tool_started,
            run_id=self._run_id,
            conversation_id=self._conversation_id,
            call_id=call.id,
            name=call.name,
            arguments=call.arguments,
            message_id=self._tally.last_message_id,
            server_id=route.server_id if route else None,
            server_name=route.server_name if route else None,
            tool=route.tool if route else None,
            user_id=self._user_id,
            status="waiting" if ask else "started",
            row_id=row_id,
            app_uri=route.app.resource_uri if route and route.app else None,
        )
        await self._journal.flush()
        if ask and route is not None and not await self._approved(call, route, row_id):
            return
        began = time.monotonic()
        try:
            outcome: ToolOutcome = await self._race_stop(toolbox.call(call.name, call.arguments))
        except Stopped:
            await self._result(
                call,
                UNKNOWN_RESULT.format(why="stopped"),
                "unknown",
                row_id,
                _since(began),
                route=route,
            )
            raise
        status = "unknown" if outcome.unknown else "failed" if outcome.is_error else "completed"
        await self._result(
            call,
            outcome.text,
            status,
            row_id,
            _since(began),
            outcome.attachments,
            route=route,
            result=outcome.result,
        )

    async def _approved(self, call: ToolCall, route: ToolRoute, row_id: str) -> bool:
        """PROV-6: shows the call and waits for the user's answer (the run stays
        ``running``); True when approved.  A refusal (or no answer in time) is the call's
        result, so the model learns the user said no."""
        run_id = self._run_id
        waiting = {
            "tool_call_id": call.id,
            "name": call.name,
            "arguments": call.arguments,
            "server": route.server_name,
            "tool": route.tool,
        }

        def approval(seq: int, status: str) -> events.Approval:
            return events.Approval(
                seq, call.id, call.name, call.arguments, route.server_name, route.tool, status
            )

        await work(self._db, runs.set_waiting, run_id, waiting)
        await self._journal.emit(approval, "waiting")
        await self._journal.flush()
        try:
            decision = await self._race_stop(
                self._approvals.wait(
                    self._db, run_id, call.id, row_id, self._settings.tool_approval_timeout
                )
            )
        except Stopped:
            await self._result(call, NOT_MADE.format(why="stopped"), "not_run", row_id, route=route)
            raise
        await work(self._db, runs.set_waiting, run_id, None)
        await self._journal.emit(approval, decision)
        if decision == "approved":
            await work(self._db, tool_calls.tool_approved, row_id)
            return True
        text = REFUSED if decision == "refused" else NOT_ANSWERED
        await self._result(call, text, "refused", row_id, route=route)
        return False

    async def _result(
        self,
        call: ToolCall,
        text: str,
        status: str,
        row_id: str | None,
        duration_ms: int | None = None,
        attachments: Sequence[ToolAttachment] = (),
        *,
        route: ToolRoute | None = None,
        result: dict[str, Any] | None = None,
    ) -> None:
        text, _cut = bound_tool_result(text, self._settings.max_answer_bytes)  # PROV-5
        files: list[dict[str, Any]] = []
        if attachments:
            # PROV-4: images and blobs are files of the tool message, stored with it.
            text, attachments = bounded(text, attachments, self._settings.max_answer_bytes)
        if attachments:
            message_id, files = await work(
                self._db,
                store_tool_message,
                self._conversation_id,
                text,
                self._settings,
                {"run_id": self._run_id, "tool": call.name, "status": status},
                {"tool_call_id": call.id},
                attachments,
            )
        else:
            message_id = await self._store(
                "tool", text, tool_call_id=call.id, meta={"tool": call.name, "status": status}
            )
        if row_id is not None:
            whole = kept_result(result, self._settings.max_answer_bytes)  # APPS-1, PROV-5
            await work(self._db, tool_calls.tool_finished, row_id, status, text, duration_ms, whole)
        await self._journal.emit(
            events.ToolResult,
            id=call.id,
            name=call.name,
            content=text,
            status=status,
            message_id=message_id,
            files=tuple(files),
            tool_call_id=row_id,
            app=route.shown_app if route else None,
        )


def _since(began: float) -> int:
    """Milliseconds since ``began`` (``time.monotonic()``)."""
    return round((time.monotonic() - began) * 1000)
