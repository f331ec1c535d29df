"""The turn service (``app.state.turns``): submits, watches, stops and recovers runs.

Its public seam is what the routes call (:class:`TurnService`).  Each change of a
conversation runs inside :meth:`TurnService.conversation`, which holds the conversation's lock
(:mod:`chatmem.turns.conversation_lock`: one turn, compaction or edit at a time); a turn's
admission is one unit (:mod:`chatmem.turns.admission`), after which the run is a task of the
app, not of the request (TURN-1), kept with the other runs of this process by
:mod:`chatmem.turns.live_runs` — which heartbeats them, recovers the runs of dead owners
(TURN-3) and, on shutdown, ends its own ``interrupted`` with what was completed kept.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Concatenate, ParamSpec, TypeVar

from chatmem.context.fact_guard import FactMemo
from chatmem.errors import InvalidInput
from chatmem.models.clients import ModelClients
from chatmem.security.endpoints import EndpointPolicy
from chatmem.security.secret_box import SecretBox
from chatmem.settings import Settings
from chatmem.store import history_keys, summaries
from chatmem.store.conversations import owned_conversation_row
from chatmem.store.db import Database
from chatmem.store.history_keys import lookup_keys
from chatmem.store.runs import RunRecord, run_for_idempotency_key
from chatmem.store.sessions import Session
from chatmem.store.token_counts import warm_tokenizers
from chatmem.store.types import new_id
from chatmem.store.units import KeyTaken, first_unique_work, quick_work, read, work
from chatmem.telemetry.metrics import Metrics
from chatmem.tools.app_host import AppHost
from chatmem.tools.approvals import Approvals, Decision, decide
from chatmem.tools.servers import ToolServers
from chatmem.tools.toolbox import McpServerConfig, ToolBox
from chatmem.turns import stateless
from chatmem.turns.admission import Admission, Redo, admitted_before, check_content
from chatmem.turns.context_view import ContextCache
from chatmem.turns.conversation_lock import Held, Purpose, hold
from chatmem.turns.coordinator import Coordinator, LocalCoordinator, coordinator_for
from chatmem.turns.events import RunEvent
from chatmem.turns.history_match import Said
from chatmem.turns.history_turns import (
    HistoryTurn,
    Named,
    NotContinued,
    admit_history,
    check_messages,
    named_conversation,
)
from chatmem.turns.inputs import Calibrations, TurnInputs
from chatmem.turns.journal import watch_run
from chatmem.turns.live_runs import LiveRuns, RunParts
from chatmem.turns.manual_compaction import compact_now, compaction_price
from chatmem.turns.versions import show_version

log = logging.getLogger(__name__)
P = ParamSpec("P")
T = TypeVar("T")


@dataclass(frozen=True)
class Submitted:
    run_id: str
    created: bool


class TurnService:
    """The turns of the app.  Its public seam is what the routes call: :meth:`submit`,
    :meth:`redo`, :meth:`submit_history`, :meth:`switch_version`, :meth:`compact` (and its
    price), :meth:`edit_summary`, each inside one :meth:`conversation` that holds the
    conversation's lock; a turn's admission is one unit (:mod:`chatmem.turns.admission`);
    :meth:`stop`, :meth:`decide`, :meth:`watch` for the runs."""

    def __init__(
        self,
        db: Database,
        settings: Settings,
        coordinator: Coordinator | None = None,
        *,
        model_factory: Callable[[TurnInputs], Any] | None = None,
        toolbox_factory: Callable[[], Awaitable[ToolBox]] | None = None,
        secrets: SecretBox,
        policy: EndpointPolicy | None = None,
        metrics: Metrics | None = None,
    ) -> None:
        self.db = db
        #: The app's metrics (``GET /metrics``); a service of its own in tests.
        self.metrics = metrics or Metrics()
        self.secrets = secrets
        self.settings = settings
        self.coordinator = coordinator or LocalCoordinator()
        #: The app's one endpoint policy (SSRF): models and MCP servers alike.
        self.policy = policy or EndpointPolicy.from_settings(settings)
        self.clients = ModelClients(self.policy, settings)
        self._model_factory = model_factory or (lambda inputs: self.clients(inputs.target.endpoint))
        self._toolbox_factory = toolbox_factory
        self.context_cache = ContextCache()
        #: CTX-2: every profile's calibration factor, for turns and the context endpoint.
        self.calibrations = Calibrations()
        #: CTX-24: what the fact guard works out for facts that recur, for every fold.
        self.facts = FactMemo()
        #: The one unit that lets a turn in (:mod:`chatmem.turns.admission`).
        self.admission = Admission(
            settings, secrets, self.calibrations, self.coordinator.replica_id
        )
        #: The MCP servers turns' tools come from: their links and their last known lists.
        self.tools = ToolServers(db, settings, secrets, self.policy)
        self.known, self.mcp = self.tools.known, self.tools.mcp  # as the routes name them
        #: APPS-1 … APPS-4: what apps show and ask, on the same links.
        self.apps = AppHost(db, settings, secrets, self.mcp)
        self.approvals = Approvals()
        #: The turns running in this process.
        self._runs = LiveRuns(
            RunParts(
                db,
                settings,
                self.coordinator,
                secrets,
                self.clients,
                self.approvals,
                self.calibrations,
                self.facts,
                self._model_factory,
                self._toolbox_for,
                self.metrics,
            )
        )

    @classmethod
    def from_settings(
        cls,
        db: Database,
        settings: Settings,
        secrets: SecretBox,
        policy: EndpointPolicy | None = None,
        metrics: Metrics | None = None,
    ) -> TurnService:
        return cls(
            db,
            settings,
            coordinator_for(settings),
            secrets=secrets,
            policy=policy,
            metrics=metrics,
        )

    # -- lifecycle --------------------------------------------------------------------------
    async def start(self) -> None:
        # The BPE encodings load lazily (about a second): load the ones profiles use now,
        # beside start-up, so the first turn's count does not pay for it on the way to its
        # first token (one no profile uses is never loaded: some 85 MB each, issue 16).
        threading.Thread(
            target=warm_tokenizers, args=(self.db,), name="chatmem-warm-tokenizers", daemon=True
        ).start()
        await self.coordinator.start()
        await self.recover()
        self.sync_mcp_servers()  # connect in the background: the first turn finds them ready
        self._runs.start_heartbeat()

    async def close(self) -> None:
        await self._runs.close()  # the runs here end interrupted (TURN-3)
        await self.coordinator.close()
        await self.clients.aclose()
        await self.tools.aclose()

    async def _db(
        self, fn: Callable[Concatenate[Session, P], T], /, *args: P.args, **kwargs: P.kwargs
    ) -> T:
        return await work(self.db, fn, *args, **kwargs)

    async def _read(
        self, fn: Callable[Concatenate[Session, P], T], /, *args: P.args, **kwargs: P.kwargs
    ) -> T:
        return await read(self.db, fn, *args, **kwargs)

    async def recover(self) -> list[str]:
        """Marks runs whose owner is dead ``interrupted`` (TURN-3, SCALE-2)."""
        return await self._runs.recover()

    def sync_mcp_servers(self) -> None:
        """Reads the enabled MCP servers and brings the links in line, in the background:
        after start-up and whenever an administrator changes a server."""
        self.tools.sync()

    # -- the seam: one conversation at a time ---------------------------------------------
    def conversation(
        self, user_id: str, conversation_id: str, purpose: Purpose
    ) -> contextlib.AbstractAsyncContextManager[Held]:
        """Holds the conversation's lock for what runs inside (:func:`hold`: taken on entry,
        released on exit unless a run took it over; busy, it refuses)."""
        return hold(self.db, self.coordinator, user_id, conversation_id, purpose)

    async def submit(
        self,
        user_id: str,
        conversation_id: str,
        content: str,
        *,
        file_ids: list[str] | None = None,
        idempotency_key: str | None = None,
        from_app: str | None = None,
    ) -> Submitted:
        """Starts a turn: stores the message ``content`` (with ``file_ids``) and answers it;
        ``from_app``: the tool call whose app sent it (APPS-3, ``ui/message``)."""
        if not content.strip() and not file_ids:
            raise InvalidInput("content: write a message first")
        return await self._submit(
            user_id, conversation_id, content, file_ids, idempotency_key, from_app=from_app
        )

    async def redo(
        self,
        user_id: str,
        conversation_id: str,
        redo: Redo,
        content: str = "",
        *,
        file_ids: list[str] | None = None,
        idempotency_key: str | None = None,
    ) -> Submitted:
        """A turn that answers again (PROJ-3): the last question once more, or replaced by
        ``content`` — the old answer (and question) stay as hidden versions."""
        if not redo.regenerate and not content.strip() and not file_ids:
            raise InvalidInput("content: write a message first")
        return await self._submit(
            user_id, conversation_id, content, file_ids, idempotency_key, redo=redo
        )

    async def _submit(
        self,
        user_id: str,
        conversation_id: str,
        content: str,
        file_ids: list[str] | None,
        idempotency_key: str | None,
        *,
        redo: Redo | None = None,
        from_app: str | None = None,
    ) -> Submitted:
        check_content(content)
        if idempotency_key:
            # Before the lock: a retry must find its run even while that run is running.
            existing = await self._read(admitted_before, user_id, conversation_id, idempotency_key)
            if existing is not None:
                return Submitted(existing, created=False)
        run_id, message_id = new_id(), new_id()
        async with self.conversation(user_id, conversation_id, "turn") as held:
            try:
                # One short unit of work — on the event loop on SQLite when the write lock
                # is free, ahead of other turns' later units (``first_work``): everything
                # that can refuse the turn, then the message and the run.
                if redo is None:
                    admitted = await first_unique_work(
                        self.db,
                        self.admission.admit,
                        user_id,
                        conversation_id,
                        run_id=run_id,
                        content=content,
                        file_ids=file_ids or [],
                        message_id=message_id,
                        idempotency_key=idempotency_key,
                        from_app=from_app,
                    )
                else:
                    admitted = await first_unique_work(
                        self.db,
                        self.admission.admit_redo,
                        user_id,
                        conversation_id,
                        redo,
                        run_id=run_id,
                        content=content,
                        file_ids=file_ids or [],
                        message_id=message_id,
                        idempotency_key=idempotency_key,
                    )
            except KeyTaken:
                # A concurrent retry with the same key won the race: answer with its run.
                winner = await self._read(run_for_idempotency_key, user_id, idempotency_key or "")
                if winner is None:
                    raise
                return Submitted(winner.id, created=False)
            live = self._runs.start(held, run_id, user_id, conversation_id, admitted)
        # The live log exists before the 202: a watcher that connects next follows it.
        await asyncio.shield(live.opened)
        return Submitted(run_id, created=True)

    async def submit_history(
        self,
        user_id: str,
        messages: Sequence[Said],
        *,
        model: str,
        conversation_id: str | None,
        tools: Sequence[Mapping[str, Any]] = (),
        options: Mapping[str, Any] | None = None,
        store: bool = True,
    ) -> HistoryTurn:
        """A turn submitted as a chat history (the OpenAI-compatible endpoint): stores what is
        new and starts the turn (:mod:`chatmem.turns.history_turns`).  ``conversation_id``:
        the name the client gave (an id, or its own key); without one the history index finds
        the conversation the history continues (API-1), or a new one starts.  ``options``
        (the client's ``temperature``, ``response_format`` …) go into each request to the
        provider as given."""
        check_messages(messages)
        if not store:
            return await stateless.answer(
                self.db,
                self.settings,
                self.secrets,
                self.clients,
                user_id,
                messages,
                model,
                tools=tools,
                options=options,
            )
        if conversation_id is not None:
            named = Named(*await self._read(named_conversation, user_id, conversation_id))
            return await self._history_turn(user_id, messages, model, named, tools, options)
        found = await self._read(history_keys.candidates, user_id, lookup_keys(messages))
        for candidate in found:
            try:
                return await self._history_turn(
                    user_id, messages, model, Named(found=candidate), tools, options
                )
            except NotContinued:
                # A stale key (the conversation changed in the UI …): it follows the view now.
                await self._db(history_keys.index_conversation, candidate)
        return await self._history_turn(user_id, messages, model, Named(), tools, options)

    def turn_events(self, user_id: str, turn: HistoryTurn) -> AsyncIterator[RunEvent]:
        """A history turn's events from the start: its run's (:meth:`watch`), or a stateless
        answer's own."""
        if turn.events is not None:
            return turn.events
        return self.watch(user_id, turn.run_id, 0, owner_checked=True)

    async def _history_turn(
        self,
        user_id: str,
        messages: Sequence[Said],
        model: str,
        named: Named,
        tools: Sequence[Mapping[str, Any]],
        options: Mapping[str, Any] | None,
    ) -> HistoryTurn:
        """The turn of :meth:`submit_history` on the conversation ``named`` says.  The new
        conversation's id, when there is one, is locked before it exists; the named (or
        found) one's lock goes to the turn unless the history diverged from it."""
        fresh = new_id()
        run_id, message_id = new_id(), new_id()
        existing = named.conversation_id or named.found
        async with contextlib.AsyncExitStack() as stack:
            held = [await stack.enter_async_context(self.conversation(user_id, fresh, "turn"))]
            if existing is not None:
                locked = self.conversation(user_id, existing, "turn")
                held.append(await stack.enter_async_context(locked))
            admitted, target, model_name = await quick_work(
                self.db,
                admit_history,
                self.admission,
                user_id,
                messages,
                model,
                named,
                fresh,
                run_id=run_id,
                message_id=message_id,
            )
            kept = next(h for h in held if h.conversation_id == target)
            client_tools = tuple(dict(t) for t in tools)
            live = self._runs.start(
                kept,
                run_id,
                user_id,
                target,
                admitted,
                client_tools=client_tools,
                request_options=options,
            )
        await asyncio.shield(live.opened)  # the live log exists before the answer starts
        return HistoryTurn(run_id, target, model_name, named.client_name)

    async def switch_version(
        self, user_id: str, conversation_id: str, message_id: str, index: int
    ) -> dict[str, Any]:
        """Shows version ``index`` of the slot of ``message_id`` (PROJ-3); refused while the
        conversation is busy (the history a turn plans from must not change under it)."""
        await self._read(owned_conversation_row, user_id, conversation_id)
        async with self.conversation(user_id, conversation_id, "edit"):
            return await self._db(show_version, user_id, conversation_id, message_id, index)

    async def edit_summary(
        self,
        user_id: str,
        conversation_id: str,
        text: str,
        edit: Callable[[Session, str, str, str], T],
    ) -> T:
        """A new summary version with the user's text (CTX-23), written by the unit ``edit``
        (which answers it as the caller shows it); refused while a turn or a compaction runs,
        so it neither races the next version nor changes the memory under a turn."""
        await self._read(owned_conversation_row, user_id, conversation_id)  # STORE-1 first
        summaries.checked_text(text)
        async with self.conversation(user_id, conversation_id, "edit"):
            return await self._db(edit, user_id, conversation_id, text)

    async def compaction_price(
        self, user_id: str, conversation_id: str, focus: str | None
    ) -> dict[str, Any]:
        """The price of "Compress now", shown on the button before it runs (CTX-11)."""
        return await compaction_price(
            self.db, self.settings, user_id, conversation_id, focus, calibrations=self.calibrations
        )

    async def compact(
        self, user_id: str, conversation_id: str, focus: str | None
    ) -> dict[str, Any]:
        """ "Compress now" (CTX-11, CTX-12): folds early messages into a summary, keeping the
        last question–answer pair.  Refusals: ``nothing_to_compress``, ``compaction_running``
        (also while a turn runs), ``insufficient_credits``."""
        await self._read(owned_conversation_row, user_id, conversation_id)
        async with self.conversation(user_id, conversation_id, "compaction"):
            return await compact_now(
                self.db,
                self.settings,
                user_id,
                conversation_id,
                focus,
                calibrations=self.calibrations,
                secrets=self.secrets,
                clients=self.clients,
                facts=self.facts,
            )

    def _toolbox_for(
        self, servers: list[McpServerConfig] | None
    ) -> Callable[[], Awaitable[ToolBox]]:
        """A run's toolbox factory: the injected one, else the default with the MCP servers
        read at its admission."""
        if self._toolbox_factory is not None:
            return self._toolbox_factory
        return lambda: self.tools.toolbox(servers)

    # -- stop and watch ---------------------------------------------------------------------
    async def stop(self, user_id: str, run_id: str) -> RunRecord:
        """Asks the user's run to stop and answers it as it then is
        (:meth:`~chatmem.turns.live_runs.LiveRuns.stop`)."""
        return await self._runs.stop(user_id, run_id)

    async def decide(
        self, user_id: str, run_id: str, call_id: str, decision: Decision
    ) -> RunRecord:
        """PROV-6: the user's answer to an "ask first" tool call their turn waits on."""
        run = await self._db(decide, user_id, run_id, call_id, decision)
        self.approvals.nudge(run_id, call_id)
        return run

    def watch(
        self, user_id: str, run_id: str, after: int, *, owner_checked: bool = False
    ) -> AsyncIterator[RunEvent]:
        """The user's run's events after ``after`` as they come (:func:`watch_run`)."""
        return watch_run(
            self.db, self.coordinator, user_id, run_id, after, owner_checked=owner_checked
        )

    def runs_here(self, run_id: str, user_id: str) -> bool:
        """Whether ``run_id`` is a turn of ``user_id`` running in this process (then its
        ownership needs no query; otherwise ask the database)."""
        live = self._runs.get(run_id)
        return live is not None and live.user_id == user_id
