"""The turn service (``app.state.turns``): submits, watches, stops and recovers runs.

It owns the server-side tasks that run turns (TURN-1): a turn is an ``asyncio`` task of the
app, not of the request, so a client that disconnects cancels nothing.  On start it marks the
runs of dead owners ``interrupted`` (TURN-3); while running it heartbeats its runs and
refreshes their conversation locks; on shutdown it cancels its tasks, which end their runs as
``interrupted`` with what was completed kept.

One turn (or compaction) per conversation at a time: the coordinator lock
``conversation:{id}`` is held for the whole run.  The database row says which of the two
holds it, for the right refusal (``turn_running`` / ``compaction_running``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Concatenate, Literal, ParamSpec, TypeVar

import anyio

from chatmem.errors import CompactionRunning, InvalidInput, NothingToCompress, TurnRunning
from chatmem.models.clients import ModelClients
from chatmem.security.endpoints import EndpointPolicy
from chatmem.security.secret_box import SecretBox
from chatmem.settings import Settings
from chatmem.store import runs, summaries
from chatmem.store.conversations import owned_conversation_row
from chatmem.store.db import Database
from chatmem.store.runs import RunRecord
from chatmem.store.sessions import Session
from chatmem.store.types import new_id
from chatmem.store.units import KeyTaken, first_unique_work, quick_work, read, work
from chatmem.tools.app_host import AppHost
from chatmem.tools.approvals import Approvals, Decision, decide
from chatmem.tools.known import KnownTools
from chatmem.tools.mcp_links import McpPool
from chatmem.tools.toolbox import McpServerConfig, ToolBox, read_mcp_servers
from chatmem.turns import recovery
from chatmem.turns.admission import Admission, Admitted, Redo, admitted_before, check_content
from chatmem.turns.compaction import run_fold
from chatmem.turns.context_view import ContextCache
from chatmem.turns.coordinator import Coordinator, LocalCoordinator
from chatmem.turns.events import RunEvent
from chatmem.turns.history_match import Said
from chatmem.turns.history_turns import HistoryTurn, admit_history, check_messages
from chatmem.turns.inputs import Calibrations, TurnInputs
from chatmem.turns.journal import EventJournal, EventWrites, stored_events
from chatmem.turns.manual_compaction import compaction_plan, price_public
from chatmem.turns.runner import TurnJob, TurnRunner
from chatmem.turns.usage import check_can_spend
from chatmem.turns.versions import show_version

log = logging.getLogger(__name__)
P = ParamSpec("P")
T = TypeVar("T")

SHUTDOWN_MESSAGE = (
    "The server shut down while this turn ran. What was completed is kept; send a message to "
    "continue."
)
LOCK_TTL = 60.0
#: What holds a conversation (:meth:`TurnService.conversation`): a turn, an edit of what a
#: turn plans from (a version shown, the summary), or a compaction.
Purpose = Literal["turn", "edit", "compaction"]


def lock_name(conversation_id: str) -> str:
    return f"conversation:{conversation_id}"


@dataclass(frozen=True)
class Submitted:
    run_id: str
    created: bool


@dataclass
class Held:
    """A conversation's lock, held inside :meth:`TurnService.conversation`."""

    conversation_id: str
    #: The coordinator lock: (name, token).
    lock: tuple[str, str]
    #: Taken over by a run, which releases it when it ends.
    handed_over: bool = False


@dataclass
class LiveRun:
    """A turn running in this process: what the service keeps about it, in one place, from
    its admission until its task has ended and its lock is released."""

    job: TurnJob
    #: The conversation lock held for the whole run: (name, token).
    lock: tuple[str, str]
    #: The coordinator's live log being opened; awaited before the 202 and by the task.
    opened: asyncio.Future[None]
    #: The MCP servers read at admission, handed to the turn's toolbox once.
    servers: list[McpServerConfig] | None
    task: asyncio.Task[None] | None = None
    released: bool = False

    @property
    def user_id(self) -> str:
        return self.job.user_id


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
    ) -> None:
        self.db = db
        self.secrets = secrets
        self.settings = settings
        self.coordinator = coordinator or LocalCoordinator()
        #: The app's one endpoint policy (SSRF): models and MCP servers alike.
        self.policy = policy or EndpointPolicy.from_settings(settings)
        self.clients = ModelClients(self.policy, settings)
        self._model_factory = model_factory or (lambda inputs: self.clients(inputs.target.endpoint))
        self._toolbox_factory = toolbox_factory or self._default_toolbox
        #: The turns running in this process, by run id.
        self._live: dict[str, LiveRun] = {}
        self._background: asyncio.Task[None] | None = None
        self._closing = False
        self.context_cache = ContextCache()
        #: CTX-2: every profile's calibration factor, for turns and the context endpoint.
        self.calibrations = Calibrations()
        #: The one unit that lets a turn in (:mod:`chatmem.turns.admission`).
        self.admission = Admission(
            settings, secrets, self.calibrations, self.coordinator.replica_id
        )
        #: Seed 003: the tools a turn would offer by each server's last known list, for the
        #: context endpoint's Tools row from the start (kept with the servers' records).
        self.known = KnownTools(db)
        #: PROV-3: one long-lived session per enabled MCP server, for the app's life.
        self.mcp = McpPool(
            self.policy,
            refresh=settings.mcp_refresh_interval,
            first_wait=settings.mcp_first_wait,
            on_listed=self.known.listed,
        )
        self._mcp_sync: asyncio.Task[None] | None = None
        #: APPS-1 … APPS-4: what apps show and ask, on the same links.
        self.apps = AppHost(db, settings, secrets, self.mcp)
        self.approvals = Approvals()
        #: SQLite: every run's event batches are stored together (one writer); PostgreSQL
        #: stores each batch in a statement of its own, side by side.
        self._event_writes = EventWrites(db) if db.is_sqlite else None

    @classmethod
    def from_settings(
        cls,
        db: Database,
        settings: Settings,
        secrets: SecretBox,
        policy: EndpointPolicy | None = None,
    ) -> TurnService:
        coordinator: Coordinator
        if settings.redis_url:
            from chatmem.turns.redis_coordinator import RedisCoordinator

            coordinator = RedisCoordinator(settings.redis_url, heartbeat=settings.replica_heartbeat)
        else:
            coordinator = LocalCoordinator()
        return cls(db, settings, coordinator, secrets=secrets, policy=policy)

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
        self._background = asyncio.create_task(
            self._heartbeat_loop(), name="chatmem-turns-heartbeat"
        )

    async def close(self) -> None:
        self._closing = True
        if self._background is not None:
            self._background.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._background
        tasks = {run_id: live.task for run_id, live in self._live.items() if live.task}
        for task in tasks.values():
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks.values(), return_exceptions=True)
        for run_id in tasks:
            # Shutting down is a restart announced in advance: the same rules (TURN-3).
            with contextlib.suppress(Exception):
                ended = await self._db(recovery.interrupt_run, run_id, message=SHUTDOWN_MESSAGE)
                if ended is not None:
                    await self._announce_end(run_id, ended)
        await self.coordinator.close()
        await self.clients.aclose()
        await self.mcp.aclose()
        await self.known.aclose()

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
        candidates = await self._read(
            lambda s: [(r.id, r.replica_id, r.conversation_id) for r in runs.running_runs(s)]
        )
        done: list[str] = []
        for run_id, replica_id, conversation_id in candidates:
            if run_id in self._live or await self.coordinator.replica_alive(replica_id):
                continue
            ended = await self._db(recovery.interrupt_run, run_id)
            if ended is not None:
                done.append(run_id)
                await self._announce_end(run_id, ended)
                await self.coordinator.force_release(lock_name(conversation_id))
        if done:
            log.info("marked %d run(s) interrupted after their process died", len(done))
        return done

    async def _announce_end(self, run_id: str, event: RunEvent) -> None:
        """A run ended by recovery: its terminal event (already stored) goes to the live log
        too, so watchers on every replica — following the log of a replica that died — see
        the run end and close."""
        if await self.coordinator.is_live(run_id):
            await self.coordinator.publish(run_id, event)
            await self.coordinator.finish_run(run_id)

    async def _heartbeat_loop(self) -> None:
        ticks = 0
        while True:
            await asyncio.sleep(self.settings.replica_heartbeat)
            ticks += 1
            try:
                for live in list(self._live.values()):
                    if not live.released:
                        await self.coordinator.refresh(*live.lock, LOCK_TTL)
                if self._live:
                    await self._db(runs.heartbeat, list(self._live), self.coordinator.replica_id)
                if self.settings.redis_url and ticks % 3 == 0:
                    await self.recover()
            except Exception:  # a blip must not end the heartbeat
                log.exception("turn heartbeat failed")

    async def _default_toolbox(self, servers: list[McpServerConfig] | None = None) -> ToolBox:
        if servers is None:
            enabled, stored = await self._read(read_mcp_servers, self.settings, self.secrets)
            self.known.servers(enabled, stored)
        else:
            enabled = servers
            self.known.servers(enabled)
        # PROV-3: the cached tools of the servers ready now; a hung one costs nothing here.
        return await self.mcp.toolbox(enabled)

    def sync_mcp_servers(self) -> None:
        """Reads the enabled MCP servers and brings the links in line, in the background
        (on the loop): after start-up and whenever an administrator changes a server."""

        async def sync() -> None:
            try:
                servers, stored = await self._read(read_mcp_servers, self.settings, self.secrets)
                self.known.servers(servers, stored)
                self.mcp.sync(servers)
            except Exception:  # the next turn syncs again
                log.exception("reading the MCP servers failed")

        self._mcp_sync = asyncio.ensure_future(sync())
        self.known.reading(self._mcp_sync)

    # -- the seam: one conversation at a time ---------------------------------------------
    @contextlib.asynccontextmanager
    async def conversation(
        self, user_id: str, conversation_id: str, purpose: Purpose
    ) -> AsyncIterator[Held]:
        """Holds the conversation's lock for what runs inside: taken on entry, released on
        exit — unless a run took it over (:meth:`_start`), which releases it when it ends.

        Busy, it refuses: ``not_found`` for somebody else's conversation (STORE-1, busy or
        not), else ``turn_running`` while a turn runs there (``compaction_running`` when the
        holder is a compaction), and ``compaction_running`` for a compaction whatever holds
        it."""
        name = lock_name(conversation_id)
        token = await self.coordinator.acquire(name, LOCK_TTL)
        if token is None:
            await self._read(owned_conversation_row, user_id, conversation_id)
            running = await self._read(runs.running_run, conversation_id)
            if running is not None and purpose != "compaction":
                raise TurnRunning()
            raise CompactionRunning()
        held = Held(conversation_id, (name, token))
        try:
            yield held
        finally:
            if not held.handed_over:
                await self.coordinator.release(name, token)

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
                winner = await self._read(
                    runs.run_for_idempotency_key, user_id, idempotency_key or ""
                )
                if winner is None:
                    raise
                return Submitted(winner.id, created=False)
            live = self._start(
                held, self._job(run_id, user_id, conversation_id, admitted), admitted.servers
            )
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
    ) -> HistoryTurn:
        """A turn submitted as a chat history (the OpenAI-compatible endpoint): stores what is
        new and starts the turn (:mod:`chatmem.turns.history_turns`).  The new conversation's
        id, when there is one, is locked before it exists; the named one's lock goes to the
        turn unless the history diverged from it."""
        check_messages(messages)
        fresh = new_id()
        run_id, message_id = new_id(), new_id()
        async with contextlib.AsyncExitStack() as stack:
            held = [await stack.enter_async_context(self.conversation(user_id, fresh, "turn"))]
            if conversation_id is not None:
                named = self.conversation(user_id, conversation_id, "turn")
                held.append(await stack.enter_async_context(named))
            admitted, target, model_name = await quick_work(
                self.db,
                admit_history,
                self.admission,
                user_id,
                messages,
                model,
                conversation_id,
                fresh,
                run_id=run_id,
                message_id=message_id,
            )
            job = self._job(run_id, user_id, target, admitted)
            job.client_tools = tuple(dict(t) for t in tools)
            kept = next(h for h in held if h.conversation_id == target)
            live = self._start(kept, job, admitted.servers)
        await asyncio.shield(live.opened)  # the live log exists before the answer starts
        return HistoryTurn(run_id, target, model_name)

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
        _, request = await self._read(
            compaction_plan,
            user_id,
            conversation_id,
            focus,
            settings=self.settings,
            calibrations=self.calibrations,
        )
        return price_public(request)

    async def compact(
        self, user_id: str, conversation_id: str, focus: str | None
    ) -> dict[str, Any]:
        """ "Compress now" (CTX-11, CTX-12): folds early messages into a summary, keeping the
        last question–answer pair.  Refusals: ``nothing_to_compress``, ``compaction_running``
        (also while a turn runs), ``insufficient_credits``."""
        await self._read(owned_conversation_row, user_id, conversation_id)
        async with self.conversation(user_id, conversation_id, "compaction"):
            inputs, request = await self._read(
                compaction_plan,
                user_id,
                conversation_id,
                focus,
                settings=self.settings,
                calibrations=self.calibrations,
                secrets=self.secrets,
                materialize=True,
            )
            if request is None:
                raise NothingToCompress()
            await self._read(check_can_spend, user_id, self.settings, float(request.estimated_cost))
            outcome = await run_fold(
                self.db,
                self.settings,
                inputs,
                kind="compaction",
                user_id=user_id,
                focus=focus,
                manual=True,
                clients=self.clients,
            )
            if outcome is None:
                raise NothingToCompress()
        price = round(float(request.estimated_cost), 8)
        return {**outcome.public(), "price": price, "currency": "USD"}

    # -- the runs of this process ---------------------------------------------------------
    @staticmethod
    def _job(run_id: str, user_id: str, conversation_id: str, admitted: Admitted) -> TurnJob:
        inputs = admitted.inputs
        return TurnJob(
            run_id,
            user_id,
            conversation_id,
            admitted.question_id,
            profile_override=inputs.target.profile_id if inputs.target.profile_id else None,
            first_inputs=inputs,
            answered=dict(inputs.answered) if inputs.answered else None,
        )

    def _start(self, held: Held, job: TurnJob, servers: list[McpServerConfig]) -> LiveRun:
        """Registers the run, hands it the conversation's lock and starts its task (on the
        loop)."""
        held.handed_over = True
        live = LiveRun(
            job,
            lock=held.lock,
            opened=asyncio.ensure_future(self.coordinator.open_run(job.run_id)),
            servers=servers,
        )
        self._live[job.run_id] = live
        live.task = asyncio.create_task(self._run(live), name=f"chatmem-turn-{job.run_id}")
        return live

    async def _run(self, live: LiveRun) -> None:
        job = live.job
        try:
            await live.opened
            journal = EventJournal(
                job.run_id,
                self.db,
                self.coordinator,
                before_end=lambda: self._release(live),
                writes=self._event_writes,
            )
            runner = TurnRunner(
                job,
                db=self.db,
                settings=self.settings,
                coordinator=self.coordinator,
                journal=journal,
                toolbox_factory=self._toolbox_for(live),
                model_factory=self._model_factory,
                secrets=self.secrets,
                clients=self.clients,
                approvals=self.approvals,
                calibrations=self.calibrations,
            )
            await runner.run()
        finally:
            with contextlib.suppress(Exception):
                await asyncio.shield(self._cleanup(live))

    def _toolbox_for(self, live: LiveRun) -> Callable[[], Awaitable[ToolBox]]:
        servers, live.servers = live.servers, None
        if self._toolbox_factory != self._default_toolbox:
            return self._toolbox_factory
        return lambda: self._default_toolbox(servers)

    async def _release(self, live: LiveRun) -> None:
        """Frees the conversation for its next turn (once)."""
        if not live.released:
            live.released = True
            await self.coordinator.release(*live.lock)

    async def _cleanup(self, live: LiveRun) -> None:
        run_id = live.job.run_id
        self._live.pop(run_id, None)
        self.coordinator.forget_stop(run_id)
        await self.coordinator.finish_run(run_id)
        await self._release(live)

    # -- stop and watch ---------------------------------------------------------------------
    async def stop(self, user_id: str, run_id: str) -> RunRecord:
        run = await self._read(runs.owned_run, user_id, run_id)
        if run.status == "running":
            await self.coordinator.request_stop(run_id)
            live = self._live.get(run_id)
            task = live.task if live is not None else None
            if task is not None:
                with contextlib.suppress(Exception), anyio.move_on_after(10):
                    await asyncio.shield(task)
            else:
                # Owned by another replica: give it a moment to notice.
                with anyio.move_on_after(5):
                    while (await self._read(runs.owned_run, user_id, run_id)).status == "running":
                        await asyncio.sleep(0.1)
        return await self._read(runs.owned_run, user_id, run_id)

    async def decide(
        self, user_id: str, run_id: str, call_id: str, decision: Decision
    ) -> RunRecord:
        """PROV-6: the user's answer to an "ask first" tool call their turn waits on."""
        run = await self._db(decide, user_id, run_id, call_id, decision)
        self.approvals.nudge(run_id, call_id)
        return run

    async def watch(
        self, user_id: str, run_id: str, after: int, *, owner_checked: bool = False
    ) -> AsyncIterator[RunEvent]:
        if not owner_checked:
            await self._read(runs.owned_run, user_id, run_id)
        last = after
        while True:
            if await self.coordinator.is_live(run_id):
                async for event in self.coordinator.watch(run_id, last):
                    yield event
                    last = event.seq
                    if event.terminal:
                        return
            for event in await self._read(stored_events, run_id, last):
                yield event
                last = event.seq
                if event.terminal:
                    return
            run = await self._read(runs.owned_run, user_id, run_id)
            if run.status != "running" and last >= run.last_seq:
                return
            await asyncio.sleep(0.2)

    def runs_here(self, run_id: str, user_id: str) -> bool:
        """Whether ``run_id`` is a turn of ``user_id`` running in this process (then its
        ownership needs no query; otherwise ask the database)."""
        live = self._live.get(run_id)
        return live is not None and live.user_id == user_id


def warm_tokenizers(db: Database) -> None:
    """Loads the encoding of every tokenizer a profile uses once (they are process-wide and
    cached); one a profile takes up later loads on its first count."""
    from chatmem import context as engine
    from chatmem.store.token_counts import tokenizers_in_use

    with contextlib.suppress(Exception):  # a database not there yet: nothing to warm
        with db.engine.connect() as connection:
            names = tokenizers_in_use(connection)
        for name in names:
            with contextlib.suppress(Exception):  # a broken encoding fails where it is used
                engine.get_tokenizer(name).count("warm up")
