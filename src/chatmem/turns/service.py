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
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Concatenate, ParamSpec, TypeVar, cast

import anyio
from sqlalchemy import select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from chatmem.context.values import Mode
from chatmem.errors import CompactionRunning, InvalidInput, NotFound, TurnRunning
from chatmem.models.clients import ModelClients
from chatmem.security.endpoints import EndpointPolicy
from chatmem.settings import Settings
from chatmem.store import runs, versions
from chatmem.store.conversations import owned_conversation_row
from chatmem.store.db import Database
from chatmem.store.engine import StepConversation
from chatmem.store.messages import insert_message
from chatmem.store.quotas import Limits
from chatmem.store.tables.conversations import File
from chatmem.store.types import new_id
from chatmem.store.units import first_work, read, work
from chatmem.tools.approvals import Approvals, Decision, decide
from chatmem.tools.known import KnownTools
from chatmem.tools.mcp_links import McpPool
from chatmem.tools.toolbox import McpServerConfig, ToolBox, load_mcp_servers, read_mcp_servers
from chatmem.turns import answerer as answers
from chatmem.turns import recovery
from chatmem.turns.context_view import ContextCache
from chatmem.turns.coordinator import Coordinator, LocalCoordinator
from chatmem.turns.events import RunEvent
from chatmem.turns.inputs import Calibrations, TurnInputs, load_inputs
from chatmem.turns.journal import EventJournal, EventWrites, stored_events
from chatmem.turns.runner import TurnJob, TurnRunner

log = logging.getLogger(__name__)
P = ParamSpec("P")
T = TypeVar("T")

SHUTDOWN_MESSAGE = (
    "The server shut down while this turn ran. What was completed is kept; send a message to "
    "continue."
)
LOCK_TTL = 60.0
MAX_CONTENT_CHARS = 1_000_000


def lock_name(conversation_id: str) -> str:
    return f"conversation:{conversation_id}"


@dataclass(frozen=True)
class Redo:
    """PROJ-3: a turn that answers again — ``regenerate`` the answer to the last question
    (``message_id``: that question or a message of its answer), or else the last question
    (``message_id``) edited and sent again."""

    message_id: str
    regenerate: bool


@dataclass(frozen=True)
class Submitted:
    run_id: str
    created: bool


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
    def __init__(
        self,
        db: Database,
        settings: Settings,
        coordinator: Coordinator | None = None,
        *,
        model_factory: Callable[[TurnInputs], Any] | None = None,
        toolbox_factory: Callable[[], Awaitable[ToolBox]] | None = None,
        secrets: Any = None,
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
        self.approvals = Approvals()
        #: SQLite: every run's event batches are stored together (one writer); PostgreSQL
        #: stores each batch in a statement of its own, side by side.
        self._event_writes = EventWrites(db) if db.is_sqlite else None

    @classmethod
    def from_settings(
        cls,
        db: Database,
        settings: Settings,
        secrets: Any = None,
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
            lambda s: [(r.id, r.replica_id, r.conversation_id) for r in recovery.running_runs(s)]
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

    # -- locks ------------------------------------------------------------------------------
    async def _take_lock(self, user_id: str, conversation_id: str, *, for_turn: bool) -> str:
        token = await self.coordinator.acquire(lock_name(conversation_id), LOCK_TTL)
        if token is not None:
            return token
        running = await self._read(runs.running_run, conversation_id)
        if running is not None and for_turn:
            raise TurnRunning()
        raise CompactionRunning()

    # -- submit -----------------------------------------------------------------------------
    async def submit(
        self,
        user_id: str,
        conversation_id: str,
        content: str,
        *,
        file_ids: list[str] | None = None,
        idempotency_key: str | None = None,
        redo: Redo | None = None,
    ) -> Submitted:
        """Starts a turn.  ``redo`` (PROJ-3): answer the last question again, or replace it
        by ``content`` — the old answer (and question) stay as hidden versions."""
        regenerate = redo is not None and redo.regenerate
        if not regenerate and not content.strip() and not file_ids:
            raise InvalidInput("content: write a message first")
        if len(content) > MAX_CONTENT_CHARS:
            raise InvalidInput(f"content: at most {MAX_CONTENT_CHARS} characters")
        if idempotency_key:
            # Before the lock: a retry must find its run even while that run is running.
            existing = await self._read(self._admit, user_id, conversation_id, idempotency_key)
            if existing is not None:
                return Submitted(existing, created=False)
        token = await self._take_lock(user_id, conversation_id, for_turn=True)
        name = lock_name(conversation_id)
        run_id, message_id = new_id(), new_id()
        try:
            try:
                # One short unit of work — on the event loop on SQLite when the write lock
                # is free, ahead of other turns' later units (``first_work``): everything
                # that can refuse the turn, then the message and the run.
                inputs, servers, message_id = await first_work(
                    self.db,
                    self._admit_redo,
                    user_id,
                    conversation_id,
                    content,
                    file_ids or [],
                    idempotency_key,
                    run_id=run_id,
                    message_id=message_id,
                    redo=redo,
                )
            except IntegrityError:
                # A concurrent retry with the same key won the race: answer with its run.
                winner = await self._read(
                    runs.run_for_idempotency_key, user_id, idempotency_key or ""
                )
                if winner is None:
                    raise
                await self.coordinator.release(name, token)
                return Submitted(winner.id, created=False)
        except BaseException:
            await self.coordinator.release(name, token)
            raise
        live = self._start(
            self._job(run_id, user_id, conversation_id, message_id, inputs), (name, token), servers
        )
        # The live log exists before the 202: a watcher that connects next follows it.
        await asyncio.shield(live.opened)
        return Submitted(run_id, created=True)

    @staticmethod
    def _job(
        run_id: str, user_id: str, conversation_id: str, message_id: str, inputs: TurnInputs
    ) -> TurnJob:
        return TurnJob(
            run_id,
            user_id,
            conversation_id,
            message_id,
            profile_override=inputs.target.profile_id if inputs.target.profile_id else None,
            first_inputs=inputs,
            answered=dict(inputs.answered) if inputs.answered else None,
        )

    def _start(
        self, job: TurnJob, lock: tuple[str, str], servers: list[McpServerConfig]
    ) -> LiveRun:
        """Registers the run and starts its task (on the loop)."""
        live = LiveRun(
            job,
            lock=lock,
            opened=asyncio.ensure_future(self.coordinator.open_run(job.run_id)),
            servers=servers,
        )
        self._live[job.run_id] = live
        live.task = asyncio.create_task(self._run(live), name=f"chatmem-turn-{job.run_id}")
        return live

    @staticmethod
    def _admit(
        session: Any, user_id: str, conversation_id: str, idempotency_key: str | None
    ) -> str | None:
        """Ownership (STORE-1), then the run a retried submit already started (TURN-6)."""
        owned_conversation_row(session, user_id, conversation_id)
        if not idempotency_key:
            return None
        existing = runs.run_for_idempotency_key(session, user_id, idempotency_key)
        if existing is None:
            return None
        if existing.conversation_id != conversation_id:
            raise InvalidInput("Idempotency-Key was already used for another conversation.")
        return existing.id

    def _prepare(
        self,
        session: Any,
        user_id: str,
        conversation_id: str,
        content: str,
        file_ids: list[str],
        *,
        turn_start: str | None = None,
    ) -> tuple[TurnInputs, list[Any]]:
        """Everything that can refuse a turn, before anything is written: ownership, the MCP
        servers the turn will use, the model (USE-3 fallback), whether it can fit (TURN-5;
        compaction first when that makes room, CTX-19), the attached files.  Returns the
        first step's inputs (the plan with the message as the draft) and the servers.
        ``turn_start``: the turn answers messages already stored from there on (the
        OpenAI-compatible endpoint's tool results); ``content`` is then no draft."""
        inputs = load_inputs(
            session,
            conversation_id,
            turn_start=turn_start,
            draft=None if turn_start else content,
            draft_files=file_ids,  # PROJ-2: only the chosen images go with the question
            user_id=user_id,
            secrets=self.secrets,
            live_only=True,
            calibrations=self.calibrations,
            choose=self._answerer,
        )
        servers = (
            load_mcp_servers(session, self.settings, self.secrets) if inputs.mcp_servers else []
        )
        if inputs.target.profile_id is None:
            # Refused before anything is stored: a turn without a model can only fail.
            raise InvalidInput("This conversation has no model: choose a model profile first.")
        inputs.plan.require_fit()  # CTX-21: admission is exactly "fits after the fold"
        if file_ids:
            found = set(
                session.scalars(
                    select(File.id).where(
                        File.id.in_(file_ids), File.conversation_id == conversation_id
                    )
                )
            )
            if found != set(file_ids):
                raise NotFound("file")
        return inputs, servers

    def _answerer(
        self, connection: Any, conversation: StepConversation
    ) -> tuple[str | None, dict[str, Any]]:
        """USE-3/USE-4: the profile that answers — the conversation's choice, unless it is
        locked (the fallback answers) or "Auto" (the best one allowed now) — read with the
        conversation; and who answers, as the feed shows it."""
        answerer = answers.chosen_answerer(
            connection,
            conversation.user_id,
            conversation.profile_id,
            conversation.own_limits,
            self.settings,
        )
        return (answerer.profile_id if answerer.reason else None), answerer.public()

    def _planned(
        self, connection: Any, conversation: StepConversation
    ) -> tuple[str | None, dict[str, Any]]:
        """:meth:`_answerer` for what runs besides a turn ("Compress now" and its price): the
        profile that would answer now, never a refusal (USE-3, CTX-11)."""
        answerer = answers.planned_answerer(
            connection, conversation.user_id, conversation.profile_id, self.settings
        )
        return (answerer.profile_id if answerer.reason else None), answerer.public()

    def _admit_turn(
        self,
        session: Any,
        user_id: str,
        conversation_id: str,
        content: str,
        file_ids: list[str],
        idempotency_key: str | None,
        *,
        run_id: str,
        message_id: str,
    ) -> tuple[TurnInputs, list[Any]]:
        """One transaction: :meth:`_prepare`, then the user's message (with its files) and the
        ``running`` run."""
        inputs, servers = self._prepare(session, user_id, conversation_id, content, file_ids)
        stored = insert_message(
            session,
            conversation_id,
            "user",
            content,
            user_id=user_id,
            limits=Limits.from_settings(self.settings),
            message_id=message_id,
        )
        if stored is None:
            raise NotFound("conversation")  # the insert checks ownership itself
        if file_ids:
            session.execute(update(File).where(File.id.in_(file_ids)).values(message_id=message_id))
        runs.start_run(
            session,
            run_id=run_id,
            user_id=user_id,
            conversation_id=conversation_id,
            user_message_id=message_id,
            replica_id=self.coordinator.replica_id,
            idempotency_key=idempotency_key,
            answered_by=inputs.target.profile_id,
            answered_reason=(inputs.answered or {}).get("reason"),
        )
        return inputs, servers

    def _admit_redo(
        self,
        session: Any,
        user_id: str,
        conversation_id: str,
        content: str,
        file_ids: list[str],
        idempotency_key: str | None,
        *,
        run_id: str,
        message_id: str,
        redo: Redo | None,
    ) -> tuple[TurnInputs, list[Any], str]:
        """:meth:`_admit_turn`, after a ``redo`` put the last answer (and question) away as
        versions (PROJ-3); also returns the id of the question the turn answers."""
        if redo is None:
            return (
                *self._admit_turn(
                    session,
                    user_id,
                    conversation_id,
                    content,
                    file_ids,
                    idempotency_key,
                    run_id=run_id,
                    message_id=message_id,
                ),
                message_id,
            )
        conversation = owned_conversation_row(session, user_id, conversation_id)
        if not redo.regenerate:
            edit = versions.begin_edit(session, conversation, redo.message_id)
            inputs, servers = self._admit_turn(
                session,
                user_id,
                conversation_id,
                content,
                file_ids,
                idempotency_key,
                run_id=run_id,
                message_id=message_id,
            )
            versions.finish_edit(session, conversation_id, edit, message_id)
            return inputs, servers, message_id
        # Regenerate: the question is stored already; the turn answers it again.
        question_id = versions.begin_regenerate(session, conversation, redo.message_id)
        inputs, servers = self._prepare(
            session, user_id, conversation_id, "", [], turn_start=question_id
        )
        runs.start_run(
            session,
            run_id=run_id,
            user_id=user_id,
            conversation_id=conversation_id,
            user_message_id=question_id,
            replica_id=self.coordinator.replica_id,
            idempotency_key=idempotency_key,
            answered_by=inputs.target.profile_id,
            answered_reason=(inputs.answered or {}).get("reason"),
        )
        return inputs, servers, question_id

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
    async def stop(self, user_id: str, run_id: str) -> dict[str, Any]:
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
        run = await self._read(runs.owned_run, user_id, run_id)
        return runs.run_public(run)

    async def decide(
        self, user_id: str, run_id: str, call_id: str, decision: Decision
    ) -> dict[str, Any]:
        """PROV-6: the user's answer to an "ask first" tool call their turn waits on."""
        run = await self._db(decide, user_id, run_id, call_id, decision)
        self.approvals.nudge(run_id, call_id)
        return cast(dict[str, Any], run)

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


# --- manual compaction (CTX-11, CTX-12) -----------------------------------------------------


def _compaction_plan(
    session: Any,
    user_id: str,
    conversation_id: str,
    focus: str | None,
    secrets: Any = None,
    materialize: bool = False,
    calibrations: Calibrations | None = None,
    choose: Any = None,
) -> tuple[TurnInputs, Any]:
    """CTX-11: what "Compress now" would fold (the engine's manual fold), and the inputs;
    ``choose``: the profile that folds and prices it (:meth:`TurnService._planned`)."""
    from chatmem import context as engine

    inputs = load_inputs(
        session,
        conversation_id,
        user_id=user_id,
        with_plan=False,
        secrets=secrets,
        materialize=materialize,
        calibrations=calibrations,
        choose=choose,
    )
    if inputs.profile.stateless:
        return inputs, None  # CTX-7: nothing is remembered, so nothing is compressed
    request = engine.compaction_request(
        inputs.conversation,
        inputs.profile,
        mode=cast(Mode, inputs.mode),
        focus=focus,
        manual=True,
        tokenizer=inputs.tokenizer,
    )
    return inputs, request


async def compaction_price(
    service: TurnService, user_id: str, conversation_id: str, focus: str | None
) -> dict[str, Any]:
    _, request = await service._read(
        _compaction_plan,
        user_id,
        conversation_id,
        focus,
        None,
        False,
        service.calibrations,
        service._planned,
    )
    if request is None:
        return {
            "available": False,
            "price": 0.0,
            "currency": "USD",
            "message": "Nothing to compress yet",
        }
    return {
        "available": True,
        "price": round(float(request.estimated_cost), 8),
        "currency": "USD",
        "message_count": int(request.message_count),
        "rounds": int(request.rounds),
    }


async def compact_now(
    service: TurnService, user_id: str, conversation_id: str, focus: str | None
) -> dict[str, Any]:
    from chatmem.errors import NothingToCompress
    from chatmem.turns.compaction import run_fold

    await service._read(owned_conversation_row, user_id, conversation_id)
    token = await service._take_lock(user_id, conversation_id, for_turn=False)
    try:
        inputs, request = await service._read(
            _compaction_plan,
            user_id,
            conversation_id,
            focus,
            service.secrets,
            True,
            service.calibrations,
            service._planned,
        )
        if request is None:
            raise NothingToCompress()
        from chatmem.turns.usage import check_can_spend

        await service._read(
            check_can_spend, user_id, service.settings, float(request.estimated_cost)
        )
        outcome = await run_fold(
            service.db,
            service.settings,
            inputs,
            kind="compaction",
            user_id=user_id,
            focus=focus,
            manual=True,
            clients=service.clients,
        )
        if outcome is None:
            raise NothingToCompress()
    finally:
        await service.coordinator.release(lock_name(conversation_id), token)
    return {**outcome.public(), "price": round(float(request.estimated_cost), 8), "currency": "USD"}
