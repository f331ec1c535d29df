"""The turns running in this process (TURN-1, TURN-3), from admission until each task has
ended and its conversation lock is released.

A turn is an ``asyncio`` task of the app, not of the request, so a client that disconnects
cancels nothing.  :meth:`LiveRuns.start` registers a run (:class:`LiveRun`), takes over the
conversation lock its admission held and starts the task, which drives a
:class:`~chatmem.turns.runner.TurnRunner` with its event journal; when the run ends the
conversation is freed (once) and the run forgotten.  While runs are here the heartbeat
refreshes their locks and marks them alive in the database; across replicas (SCALE-2) it also
recovers every third beat.  Recovery marks a run whose owner is dead ``interrupted`` and
sends its end to whoever follows its live log; on shutdown the runs here are cancelled and
end the same way (a restart announced in advance), with what was completed kept.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import anyio

from chatmem.context.fact_guard import FactMemo
from chatmem.models.clients import ModelClients
from chatmem.security.secret_box import SecretBox
from chatmem.settings import Settings
from chatmem.store import runs
from chatmem.store.db import Database
from chatmem.store.runs import RunRecord
from chatmem.store.units import read, work
from chatmem.telemetry.metrics import Metrics
from chatmem.tools.approvals import Approvals
from chatmem.tools.toolbox import McpServerConfig, ToolBox
from chatmem.turns import recovery
from chatmem.turns.admission import Admitted
from chatmem.turns.conversation_lock import LOCK_TTL, Held, lock_name
from chatmem.turns.coordinator import Coordinator
from chatmem.turns.events import RunEvent
from chatmem.turns.inputs import Calibrations, TurnInputs
from chatmem.turns.journal import EventJournal, EventWrites
from chatmem.turns.monitor import TurnMonitor
from chatmem.turns.runner import TurnJob, TurnRunner

log = logging.getLogger(__name__)

SHUTDOWN_MESSAGE = (
    "The server shut down while this turn ran. What was completed is kept; send a message to "
    "continue."
)


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


@dataclass(frozen=True)
class RunParts:
    """What every turn of the app runs with: the collaborators of each
    :class:`~chatmem.turns.runner.TurnRunner`."""

    db: Database
    settings: Settings
    coordinator: Coordinator
    secrets: SecretBox
    clients: ModelClients
    approvals: Approvals
    calibrations: Calibrations
    facts: FactMemo
    model_factory: Callable[[TurnInputs], Any]
    #: The toolbox factory of one run, given the MCP servers read at its admission.
    toolbox_for: Callable[[list[McpServerConfig] | None], Callable[[], Awaitable[ToolBox]]]
    metrics: Metrics


def _profile_label(job: TurnJob) -> str | None:
    """Who answers, as logs and metrics name it: the profile's name when the turn knows it
    (Auto, the fallback), else its id."""
    name = (job.answered or {}).get("name")
    if name:
        return str(name)
    inputs = job.first_inputs
    return job.profile_override or (inputs.target.profile_id if inputs is not None else None)


class LiveRuns:
    """The runs of this process, by run id (see the module docstring)."""

    def __init__(self, parts: RunParts) -> None:
        self._parts = parts
        self._live: dict[str, LiveRun] = {}
        self._heartbeat: asyncio.Task[None] | None = None
        #: SQLite: every run's event batches are stored together (one writer); PostgreSQL
        #: stores each batch in a statement of its own, side by side.
        self._event_writes = EventWrites(parts.db) if parts.db.is_sqlite else None

    def get(self, run_id: str) -> LiveRun | None:
        return self._live.get(run_id)

    async def stop(self, user_id: str, run_id: str) -> RunRecord:
        """Asks the user's run to stop (``not_found`` for another user's) and answers it as
        it then is: a run of this process is waited for (up to 10 s) to end; another
        replica's is given a moment (5 s) to notice."""
        db, coordinator = self._parts.db, self._parts.coordinator
        run = await read(db, runs.owned_run, user_id, run_id)
        if run.status == "running":
            await coordinator.request_stop(run_id)
            live = self._live.get(run_id)
            task = live.task if live is not None else None
            if task is not None:
                with contextlib.suppress(Exception), anyio.move_on_after(10):
                    await asyncio.shield(task)
            else:
                with anyio.move_on_after(5):
                    while (await read(db, runs.owned_run, user_id, run_id)).status == "running":
                        await asyncio.sleep(0.1)
        return await read(db, runs.owned_run, user_id, run_id)

    def start(
        self,
        held: Held,
        run_id: str,
        user_id: str,
        conversation_id: str,
        admitted: Admitted,
        *,
        client_tools: tuple[dict[str, Any], ...] = (),
        request_options: Mapping[str, Any] | None = None,
    ) -> LiveRun:
        """Registers the run ``admitted`` let in, hands it the conversation's lock and starts
        its task (on the loop)."""
        inputs = admitted.inputs
        job = TurnJob(
            run_id,
            user_id,
            conversation_id,
            admitted.question_id,
            profile_override=inputs.target.profile_id if inputs.target.profile_id else None,
            first_inputs=inputs,
            answered=dict(inputs.answered) if inputs.answered else None,
            client_tools=client_tools,
            request_options=dict(request_options or {}),
        )
        held.handed_over = True
        live = LiveRun(
            job,
            lock=held.lock,
            opened=asyncio.ensure_future(self._parts.coordinator.open_run(job.run_id)),
            servers=admitted.servers,
        )
        self._live[job.run_id] = live
        live.task = asyncio.create_task(self._run(live), name=f"chatmem-turn-{job.run_id}")
        return live

    async def _run(self, live: LiveRun) -> None:
        job, parts = live.job, self._parts
        monitor = TurnMonitor(
            parts.metrics,
            job.run_id,
            job.conversation_id,
            _profile_label(job),
        )
        monitor.started()
        try:
            await live.opened
            journal = EventJournal(
                job.run_id,
                parts.db,
                parts.coordinator,
                before_end=lambda: self._release(live),
                writes=self._event_writes,
                observe=monitor.seen,
            )
            servers, live.servers = live.servers, None
            runner = TurnRunner(
                job,
                db=parts.db,
                settings=parts.settings,
                coordinator=parts.coordinator,
                journal=journal,
                toolbox_factory=parts.toolbox_for(servers),
                model_factory=parts.model_factory,
                secrets=parts.secrets,
                clients=parts.clients,
                approvals=parts.approvals,
                calibrations=parts.calibrations,
                facts=parts.facts,
            )
            await runner.run()
        finally:
            monitor.closed()
            with contextlib.suppress(Exception):
                await asyncio.shield(self._cleanup(live))

    async def _release(self, live: LiveRun) -> None:
        """Frees the conversation for its next turn (once)."""
        if not live.released:
            live.released = True
            await self._parts.coordinator.release(*live.lock)

    async def _cleanup(self, live: LiveRun) -> None:
        run_id = live.job.run_id
        self._live.pop(run_id, None)
        self._parts.coordinator.forget_stop(run_id)
        await self._parts.coordinator.finish_run(run_id)
        await self._release(live)

    # -- heartbeat, recovery, shutdown ----------------------------------------------------
    def start_heartbeat(self) -> None:
        self._heartbeat = asyncio.create_task(
            self._heartbeat_loop(), name="chatmem-turns-heartbeat"
        )

    async def _heartbeat_loop(self) -> None:
        settings, coordinator = self._parts.settings, self._parts.coordinator
        ticks = 0
        while True:
            await asyncio.sleep(settings.replica_heartbeat)
            ticks += 1
            try:
                for live in list(self._live.values()):
                    if not live.released:
                        await coordinator.refresh(*live.lock, LOCK_TTL)
                if self._live:
                    await work(
                        self._parts.db,
                        runs.heartbeat,
                        list(self._live),
                        coordinator.replica_id,
                    )
                if settings.redis_url and ticks % 3 == 0:
                    await self.recover()
            except Exception:  # a blip must not end the heartbeat
                log.exception("turn heartbeat failed")

    async def recover(self) -> list[str]:
        """Marks runs whose owner is dead ``interrupted`` (TURN-3, SCALE-2)."""
        db, coordinator = self._parts.db, self._parts.coordinator
        candidates = await read(
            db,
            lambda s: [(r.id, r.replica_id, r.conversation_id) for r in runs.running_runs(s)],
        )
        done: list[str] = []
        for run_id, replica_id, conversation_id in candidates:
            if run_id in self._live or await coordinator.replica_alive(replica_id):
                continue
            ended = await work(db, recovery.interrupt_run, run_id)
            if ended is not None:
                done.append(run_id)
                await self._announce_end(run_id, ended)
                await coordinator.force_release(lock_name(conversation_id))
        if done:
            log.info("marked %d run(s) interrupted after their process died", len(done))
        return done

    async def _announce_end(self, run_id: str, event: RunEvent) -> None:
        """A run ended by recovery: its terminal event (already stored) goes to the live log
        too, so watchers on every replica — following the log of a replica that died — see
        the run end and close."""
        coordinator = self._parts.coordinator
        if await coordinator.is_live(run_id):
            await coordinator.publish(run_id, event)
            await coordinator.finish_run(run_id)

    async def close(self) -> None:
        """Shutting down: the heartbeat stops and the runs here are cancelled; each ends
        ``interrupted`` by the rules of a restart (TURN-3), announced in advance."""
        if self._heartbeat is not None:
            self._heartbeat.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._heartbeat
        tasks = {run_id: live.task for run_id, live in self._live.items() if live.task}
        for task in tasks.values():
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks.values(), return_exceptions=True)
        for run_id in tasks:
            with contextlib.suppress(Exception):
                ended = await work(
                    self._parts.db,
                    recovery.interrupt_run,
                    run_id,
                    message=SHUTDOWN_MESSAGE,
                )
                if ended is not None:
                    await self._announce_end(run_id, ended)
