"""One turn, start to finish: plan → (compaction) → stream → tools → checkpoint → repeat.

Theory of operation
-------------------
A turn is a loop of *steps*.  Each step asks the engine for a fresh plan (so the budget is
recomputed after every tool call, CTX-13), runs the compaction the plan asks for first
(CTX-4, CTX-5), refuses a request that cannot fit (CTX-19, TURN-5), then streams one model
answer.  Text arrives as ``delta`` events; when the answer is complete the assistant message
is written — the checkpoint (TURN-2).  If the answer requested tools, each call is recorded
as ``started`` *before* it is made, made through MCP, and its result stored as a ``tool``
message and marked ``completed``; then the next step begins.  A turn ends with ``done``
(``completed`` or ``stopped``) or ``error`` (``failed``).

Stop.  The stop signal is raced against the model stream and the tool call; on stop, the
text streamed so far is kept as the assistant message (marked ``stopped``), a tool call in
flight gets an "unknown" result (never replayed; the call is abandoned inside its server's
link at once, whatever the server does: ``turns.mcp_links``), and the run ends ``stopped``.

Ask first (PROV-6).  A tool its server marks "ask first" is recorded ``waiting`` and shown
(the run's ``waiting`` field, an ``approval`` event); the turn — still ``running``, Stop
still works — waits for the user's answer (``turns.approvals``).  A refusal, or no answer
in time, is the call's result, so the model learns the user said no.

Guard (TURN-4).  At most ``turn_max_iterations`` model requests and ``turn_max_tool_calls``
tool calls per turn.  When the guard trips, the turn ends ``completed`` with a note and an
assistant message saying so; the next turn continues on the stored history.  Tool calls that
were requested but not made still get a tool message, so a call is never separated from a
result (CTX-20).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Concatenate, ParamSpec, TypeVar

from chatmem.context import get_tokenizer
from chatmem.context.errors import EngineError
from chatmem.context.fact_guard import FactMemo
from chatmem.context.values import ToolCall
from chatmem.errors import (
    AnswerTooLarge,
    ChatmemError,
    ProviderContextLength,
    ProviderEmptyStream,
    ProviderError,
    ProviderRefusesTools,
)
from chatmem.models.clients import ModelClients
from chatmem.models.request_options import for_request
from chatmem.models.stream import Finish, ReasoningDelta, TextDelta, ToolCallEvent, Usage
from chatmem.settings import Settings
from chatmem.store import runs
from chatmem.store.db import Database
from chatmem.store.ledger import record_usage
from chatmem.store.messages import store_message
from chatmem.store.profiles import turn_recall_off
from chatmem.store.sessions import Session
from chatmem.store.types import new_id
from chatmem.store.units import read, work
from chatmem.tools.approvals import Approvals
from chatmem.tools.client import ClientTools
from chatmem.tools.recall import Recall
from chatmem.tools.toolbox import ToolBox
from chatmem.turns import events
from chatmem.turns.compaction import run_fold
from chatmem.turns.coordinator import Coordinator
from chatmem.turns.inputs import (
    Calibrations,
    TurnInputs,
    learn_overflow,
    load_inputs,
    raw_estimate,
)
from chatmem.turns.journal import EventJournal
from chatmem.turns.metering import counted_answer
from chatmem.turns.tool_steps import Stopped, Tally, ToolSteps

log = logging.getLogger(__name__)

#: Finish reasons that mean the answer was cut short, not finished: the model's output limit,
#: the provider's content filter.
CUT_REASONS = frozenset({"length", "content_filter"})
#: Issue 29: the usage details summed over a turn's answers and carried in ``done``'s usage
#: (when some answer reported them): prompt tokens the provider had cached, answer tokens
#: spent thinking.
DETAIL_KEYS = ("cached_tokens", "reasoning_tokens")
#: Folds one model step may start.  One fold makes as many rounds as it needs; a second
#: runs only when the stored summary came out longer than the engine counted on.
FOLD_ATTEMPTS = 3
T = TypeVar("T")
P = ParamSpec("P")
#: Counts an answer when a step has no tokenizer of its own (PROV-1).
_ESTIMATE = get_tokenizer("estimate")

GUARD_MESSAGE = (
    "I stopped here: this turn reached its limit of {what}. Send a message to continue "
    "from where I left off."
)


class MemoryNotFolded(ChatmemError):
    code = "does_not_fit"

    def __init__(self) -> None:
        super().__init__(
            "The memory could not be compressed enough for this request: the summaries came "
            "out longer than the model's window allows. Compress now, or start a new chat."
        )


@dataclass
class TurnJob:
    run_id: str
    user_id: str
    conversation_id: str
    user_message_id: str
    #: USE-3: the fallback profile when the user's included usage is used up.
    profile_override: str | None = None
    #: The plan made when the turn was admitted (the message as the draft).  Reused for the
    #: first step when no tools are offered — it is the same request — to save a re-plan on
    #: the way to the first token.
    first_inputs: TurnInputs | None = None
    #: USE-4: who answers, as the feed shows it (``answerer.Answerer.public()``): stored with
    #: each answer and sent with ``done``.
    answered: dict[str, Any] | None = None
    #: The tools an OpenAI-compatible client offers and runs itself (``turns.client_tools``):
    #: an answer that calls one ends the turn, its calls handed back to the client.
    client_tools: tuple[dict[str, Any], ...] = ()
    #: What an OpenAI-compatible client asked of the provider (``temperature``,
    #: ``response_format``, ``tool_choice`` …): added to each request of the turn as given,
    #: with the profile's defaults and pins (``TurnInputs.request_options``, issue 29).
    request_options: dict[str, Any] = field(default_factory=dict)


class TurnRunner:
    """Runs one :class:`TurnJob`.  Created per turn by the turn service."""

    def __init__(
        self,
        job: TurnJob,
        *,
        db: Database,
        settings: Settings,
        coordinator: Coordinator,
        journal: EventJournal,
        toolbox_factory: Callable[[], Awaitable[ToolBox]],
        model_factory: Callable[[TurnInputs], Any],
        secrets: Any = None,
        clients: ModelClients,
        approvals: Approvals | None = None,
        calibrations: Calibrations | None = None,
        facts: FactMemo | None = None,
    ) -> None:
        self._calibrations = calibrations or Calibrations()
        self._facts = facts
        self._secrets = secrets
        self._approvals = approvals or Approvals()
        self._clients = clients
        self.job = job
        self._db = db
        self._settings = settings
        self._coordinator = coordinator
        self._journal = journal
        self._toolbox_factory = toolbox_factory
        self._model_factory = model_factory
        self._stop = coordinator.stop_signal(job.run_id)
        self._tally = Tally()
        self._steps = ToolSteps(
            run_id=job.run_id,
            conversation_id=job.conversation_id,
            user_id=job.user_id,
            db=db,
            settings=settings,
            journal=journal,
            approvals=self._approvals,
            tally=self._tally,
            store=self._store,
            race_stop=self._race_stop,
        )
        #: The built-in ``recall`` tool (issue 17), answered here instead of by MCP.
        self._recall = Recall(db, job.conversation_id)
        #: The last answer's checkpoint, stored with the run's end (see ``_answer``).
        self._final: tuple[Callable[[Any], None], dict[str, Any]] | None = None

    # -- helpers ----------------------------------------------------------------------------
    async def _db_call(
        self, fn: Callable[Concatenate[Session, P], T], *args: P.args, **kwargs: P.kwargs
    ) -> T:
        return await work(self._db, fn, *args, **kwargs)

    async def _race_stop(self, awaitable: Awaitable[T]) -> T:
        """Await ``awaitable`` unless the stop signal fires first (then cancel it)."""
        if self._stop.is_set():
            if asyncio.iscoroutine(awaitable):
                awaitable.close()  # never started: closed, so it is not "never awaited"
            raise Stopped
        task = asyncio.ensure_future(awaitable)
        stopper = asyncio.ensure_future(self._stop.wait())
        try:
            done, _ = await asyncio.wait({task, stopper}, return_when=asyncio.FIRST_COMPLETED)
        except BaseException:
            task.cancel()
            stopper.cancel()
            raise
        await _cancel_and_wait(stopper)
        if task in done:
            return task.result()
        await _cancel_and_wait(task)
        raise Stopped

    async def _store(self, role: str, content: str, **kw: Any) -> str:
        meta = {"run_id": self.job.run_id, **kw.pop("meta", {})}
        return await self._db_call(
            store_message, self.job.conversation_id, role, content, self._settings, meta, kw
        )

    # -- the turn ---------------------------------------------------------------------------
    async def run(self) -> str:
        """Runs the turn to its end; returns the final run status."""
        toolbox: ToolBox | None = None
        try:
            toolbox = await self._toolbox_factory()
            if self.job.client_tools:
                toolbox = ClientTools(toolbox, self.job.client_tools)
            note = await self._loop(toolbox)
            await self._finish("completed", note=note)
            return "completed"
        except Stopped:
            await self._finish("stopped")
            return "stopped"
        except asyncio.CancelledError:
            # The process is shutting down.  Store the events streamed so far and leave the
            # run to the same path as a crash (``recovery.interrupt_run``), which the turn
            # service takes right after cancelling: text kept, open tool calls ``unknown``.
            final, self._final = self._final, None
            with contextlib.suppress(Exception):
                if final is not None:
                    await asyncio.shield(self._checkpoint(*final))
                else:
                    await asyncio.shield(self._journal.flush())
            raise
        except (ChatmemError, EngineError) as exc:
            code = getattr(exc, "code", "error")
            message = getattr(exc, "message", None) or str(exc)
            await self._finish("failed", error=(code, message))
            return "failed"
        except Exception:
            log.exception("turn %s failed", self.job.run_id)
            await self._finish("failed", error=("internal_error", "The turn failed on the server."))
            return "failed"
        finally:
            if toolbox is not None:
                with contextlib.suppress(Exception):
                    await toolbox.aclose()

    async def _loop(self, toolbox: ToolBox) -> str | None:
        settings = self._settings
        while True:
            if self._tally.iterations >= settings.turn_max_iterations:
                return await self._guard(f"{settings.turn_max_iterations} model requests")
            first, self.job.first_inputs = self.job.first_inputs, None
            # The admission's plan knows neither the client's tools nor its request options.
            reuse = not toolbox.schemas and not self.job.request_options
            inputs = first if first is not None and reuse else await self._inputs(toolbox)
            # CTX-21: the engine's fold driver folds as far as the request needs, in as many
            # summariser rounds as that takes; then the stored memory is planned again.
            for _ in range(FOLD_ATTEMPTS):
                if not inputs.plan.compaction.needed or not inputs.plan.fits:
                    break
                await self._fold(toolbox)
                inputs = await self._inputs(toolbox)
            plan = inputs.plan
            plan.require_fit()
            if plan.compaction.needed:
                raise MemoryNotFolded()
            self._tally.iterations += 1
            try:
                _text, calls = await self._answer(inputs)
            except ProviderRefusesTools:
                if not await self._recall_refused(inputs, toolbox):
                    raise
                continue  # planned again, without the tool, and sent again
            if not calls:
                return None
            handed_back = toolbox.handed_back(calls) if isinstance(toolbox, ClientTools) else []
            made = [call for call in calls if call not in handed_back]
            if made and not await self._steps.make(self._recall.box(toolbox, inputs), made):
                return await self._guard(f"{settings.turn_max_tool_calls} tool calls")
            if handed_back:
                await self._steps.hand_back(handed_back)
                return None

    async def _recall_refused(self, inputs: TurnInputs, toolbox: ToolBox) -> bool:
        """The model server refused the step's tools.  When the only one was the built-in
        ``recall``, offered by the mode's default (nobody chose it), the profile's switch goes
        off (:func:`~chatmem.store.profiles.turn_recall_off`: the profile page shows it, the
        next plan leaves the tool out and counts no schema for it) and the step can be sent
        again.  Tools somebody chose stay: the refusal fails the turn, saying so."""
        if not inputs.recall_by_default or toolbox.schemas or inputs.profile_id is None:
            return False
        if not await self._db_call(turn_recall_off, inputs.profile_id):
            return False  # somebody set the switch meanwhile: theirs is the say
        log.info(
            "model %s takes no tools: recall turned off for profile %s",
            inputs.model,
            inputs.profile_id,
        )
        return True

    async def _inputs(self, toolbox: ToolBox, *, materialize: bool = False) -> TurnInputs:
        def load(session: Session) -> TurnInputs:
            return load_inputs(
                session,
                self.job.conversation_id,
                toolbox.schemas,
                self.job.user_message_id,
                secrets=self._secrets,
                profile_override=self.job.profile_override,
                materialize=materialize,
                calibrations=self._calibrations,
                request_options=self.job.request_options,
            )

        return await read(self._db, load)

    async def _fold(self, toolbox: ToolBox) -> None:
        inputs = await self._inputs(toolbox, materialize=True)
        await run_fold(
            self._db,
            self._settings,
            inputs,
            kind="summary" if inputs.mode == "economy" else "compaction",
            user_id=self.job.user_id,
            run_id=self.job.run_id,
            turn_start=self.job.user_message_id,
            clients=self._clients,
            emit=self._journal.emit,
            race=self._race_stop,
            facts=self._facts,
        )

    async def _answer(self, inputs: TurnInputs) -> tuple[str, list[ToolCall]]:
        """One model request, streamed to the watchers as it comes (``reasoning`` events for
        the model's thinking, ``delta`` for the answer's text) and stored: the answer's text
        as the message, its thinking beside it (``meta.reasoning``) — shown, billed, never
        sent back to the model with the history."""
        client = self._model_factory(inputs)
        parts: list[str] = []
        thoughts: list[str] = []
        calls: list[ToolCall] = []
        usage: Usage | None = None
        finish: str | None = None
        step = self._tally.iterations

        async def consume() -> None:
            nonlocal usage, finish
            async for event in client.stream(
                inputs.plan.messages,
                tools=inputs.tools or None,
                max_tokens=None,
                extra=for_request(inputs.request_options, offers_tools=bool(inputs.tools)) or None,
            ):
                if isinstance(event, TextDelta):
                    parts.append(event.text)
                    await self._journal.emit(events.Delta, event.text, step)
                elif isinstance(event, ReasoningDelta):
                    thoughts.append(event.text)
                    await self._journal.emit(events.Reasoning, event.text, step)
                elif isinstance(event, Finish):
                    finish = event.reason
                elif isinstance(event, ToolCallEvent):
                    calls.append(event.call)
                elif isinstance(event, Usage):
                    usage = event

        try:
            try:
                await self._race_stop(consume())
            except ProviderEmptyStream:
                # PROV-2: HTTP 200 and nothing in it — llama.cpp's answer to a prompt beyond
                # its context.  One request without streaming says what the matter is.
                await self._probe(client, inputs)
        except Stopped:
            if parts or thoughts:
                stopped = {"stopped": True, "step": step, **_reasoning(thoughts)}
                await self._keep_partial(inputs, parts, usage, stopped)
            await self._journal.flush()
            raise
        except ProviderContextLength as exc:
            # PROV-2: the provider counts more than we did.  Learnt at once, so the next
            # plan folds or refuses instead of sending the same request again.
            await self._learn_overflow(inputs, exc)
            raise
        except ChatmemError as exc:
            # The provider failed mid-answer: keep what it had said (TURN-2), then fail.  An
            # answer past the size bound (PROV-5) keeps what arrived up to the bound.
            if parts or thoughts:
                meta: dict[str, Any] = {"failed": True, "step": step, **_reasoning(thoughts)}
                if isinstance(exc, AnswerTooLarge):
                    meta["truncated"] = True
                await self._keep_partial(inputs, parts, usage, meta)
            raise
        text = "".join(parts)
        # The thinking is billed as answer tokens (counted with the text when not reported).
        billed = "".join(thoughts) + text
        ledger = self._usage(inputs, usage, "answer", text=billed, calls=calls)
        # The answer's checkpoint (TURN-2) is one transaction: its ledger row (USE-1), the
        # assistant message and the events streamed so far.
        kept = {"step": step, **_reasoning(thoughts)}
        self._tally.cut = finish if finish in CUT_REASONS else None
        if self._tally.cut:
            kept["finish_reason"] = self._tally.cut  # the feed says the answer was cut
        message_id, checkpoint = self._answer_unit(text, ledger, kept, calls)
        self._tally.last_message_id = message_id
        if calls:
            await self._checkpoint(checkpoint, ledger)
        else:
            # The turn's last answer: stored with the run's end, in the same transaction,
            # before ``done`` is published (one commit fewer per turn).
            self._final = (checkpoint, ledger)
        return text, calls

    def _answer_unit(
        self,
        text: str,
        ledger: dict[str, Any],
        meta: dict[str, Any],
        calls: list[ToolCall] | None = None,
    ) -> tuple[str, Callable[[Any], None]]:
        """An assistant message and its ledger row as one unit of work, and the message's id."""
        conversation_id, settings = self.job.conversation_id, self._settings
        full_meta = {"run_id": self.job.run_id, **meta}
        if self.job.answered is not None:
            full_meta["answered_by"] = self.job.answered
        message_id = new_id()

        def unit(session: Session) -> None:
            record_usage(session, **ledger)
            store_message(
                session,
                conversation_id,
                "assistant",
                text,
                settings,
                full_meta,
                {"tool_calls": calls or None, "message_id": message_id},
            )

        return message_id, unit

    async def _keep_partial(
        self, inputs: TurnInputs, parts: list[str], usage: Usage | None, meta: dict[str, Any]
    ) -> None:
        """A stopped or failed answer's text (and thinking, in ``meta``), stored with its
        ledger row: the provider produced it and bills it (PROV-1: counted when it reported
        nothing).  An answer stopped while still thinking has no text to keep: its ledger
        row alone (no empty message is ever stored)."""
        text = "".join(parts)
        billed = str(meta.get("reasoning", "")) + text
        ledger = self._usage(inputs, usage, "answer", text=billed)
        if not text:
            await self._db_call(record_usage, **ledger)
            return
        message_id, unit = self._answer_unit(text, ledger, meta)

        try:
            await self._db_call(unit)
        except Exception:
            with contextlib.suppress(Exception):
                await self._db_call(record_usage, **ledger)
            raise
        self._tally.last_message_id = message_id

    async def _probe(self, client: Any, inputs: TurnInputs) -> None:
        """PROV-2: after an empty stream, the same request once without streaming
        (``max_tokens`` 1).  Raises its context-length error — or, when the provider answers
        it, a plain error saying the stream came back empty (the probe is billed)."""
        usage = await self._race_stop(
            client.probe(inputs.plan.messages, tools=inputs.tools or None)
        )
        ledger = self._usage(inputs, usage, "probe")
        await self._db_call(record_usage, **ledger)
        raise ProviderError(
            "The model API answered with an empty stream, although it accepts this request "
            "without streaming. Send the message again; if this repeats, check the model "
            "server."
        )

    async def _learn_overflow(self, inputs: TurnInputs, error: ProviderContextLength) -> None:
        """PROV-2: the count the provider named (or the least that explains its refusal)
        recalibrates the profile at once (an ``overflow`` ledger row, the cache updated)."""
        factor = await self._db_call(
            learn_overflow, inputs, error.requested_tokens, self.job.run_id, self._calibrations
        )
        log.info(
            "model %s refused %s estimated tokens as too long (it named %s, window %s); "
            "profile %s now calibrated at %.3g",
            inputs.model,
            inputs.plan_tokens_used,
            error.requested_tokens,
            error.window,
            inputs.profile_id,
            factor,
        )
        window = error.window
        if window is not None and 0 < window < inputs.profile.context_window:
            error.message = (
                f"{error.message} The model server says its window is {window:,} tokens; this "
                f"model profile says {inputs.profile.context_window:,}: set the profile's "
                "context window to what the server has."
            )

    async def _checkpoint(self, fn: Callable[[Any], None], ledger: dict[str, Any] | None) -> None:
        """Stores the events so far with ``fn`` in one transaction."""
        try:
            await self._journal.flush(fn)
        except Exception:
            # Whatever stopped the checkpoint (the conversation was deleted meanwhile), the
            # model call was made: its ledger row is kept on its own.
            if ledger is not None:
                with contextlib.suppress(Exception):
                    await self._db_call(record_usage, **ledger)
            raise

    def _usage(
        self,
        inputs: TurnInputs,
        usage: Usage | None,
        kind: str,
        *,
        text: str = "",
        calls: list[ToolCall] | None = None,
    ) -> dict[str, Any]:
        """Adds one model call to the turn's tally; returns its ledger row.

        PROV-1: what the provider did not report is counted — the prompt as the plan counted
        it, the answer (``text``, ``calls``) with the profile's tokenizer — and the row is
        marked ``estimated``.  Output is never 0 tokens."""
        reported_prompt = usage.prompt_tokens if usage is not None else 0
        reported_completion = usage.completion_tokens if usage is not None else 0
        prompt = reported_prompt if reported_prompt > 0 else inputs.plan_tokens_used
        completion = (
            reported_completion
            if reported_completion > 0
            else counted_answer(inputs.tokenizer or _ESTIMATE, text, calls or ())
        )
        estimated = reported_prompt <= 0 or reported_completion <= 0
        cost = inputs.cost(prompt, completion)
        self._tally.usage["prompt_tokens"] += prompt
        self._tally.usage["completion_tokens"] += completion
        # Issue 29: the details the provider reported (only then: a 0 would claim to know).
        details = (usage.cached_tokens, usage.reasoning_tokens) if usage is not None else ()
        for key, detail in zip(DETAIL_KEYS, details, strict=False):
            if detail is not None:
                self._tally.usage[key] = self._tally.usage.get(key, 0) + detail
        self._tally.cost += cost
        return dict(
            user_id=self.job.user_id,
            conversation_id=self.job.conversation_id,
            run_id=self.job.run_id,
            kind=kind,
            profile_id=inputs.profile_id,
            model=inputs.model,
            prompt_tokens=prompt,
            completion_tokens=completion,
            cost=cost,
            # Raw (uncalibrated), so the calibration compares like with like (CTX-2).
            estimated_prompt_tokens=raw_estimate(inputs),
            estimated=estimated,
        )

    async def _guard(self, what: str) -> str:
        note = GUARD_MESSAGE.format(what=what)
        self._tally.last_message_id = await self._store("assistant", note, meta={"guard": True})
        return note

    # -- endings ----------------------------------------------------------------------------
    async def _finish(
        self, status: str, *, note: str | None = None, error: tuple[str, str] | None = None
    ) -> None:
        run_id = self.job.run_id

        def finish_row(session: Session) -> None:
            # Stored with the terminal event, in one transaction.
            runs.finish_run(
                session,
                run_id,
                status,
                error_code=error[0] if error else None,
                error_message=error[1] if error else None,
                note=note,
            )

        final, self._final = self._final, None
        fn, ledger = final if final is not None else (None, None)

        def unit(session: Session) -> None:
            if fn is not None:
                fn(session)
            finish_row(session)

        try:
            if error is not None:
                await self._journal.end(unit, events.Error, code=error[0], message=error[1])
            else:
                await self._journal.end(
                    unit,
                    events.Done,
                    status=status,
                    message_id=self._tally.last_message_id,
                    note=note,
                    usage=self._tally.usage,
                    cost=round(self._tally.cost, 8),
                    answered_by=self.job.answered,
                    # The last answer was cut (``length``, ``content_filter``), else None.
                    finish_reason=self._tally.cut,
                )
        except Exception:
            if ledger is not None:
                with contextlib.suppress(Exception):
                    await self._db_call(record_usage, **ledger)
            raise


def _reasoning(thoughts: list[str]) -> dict[str, str]:
    """The answer's thinking as its message keeps it (``meta.reasoning``), if it thought."""
    return {"reasoning": "".join(thoughts)} if thoughts else {}


async def _cancel_and_wait(task: asyncio.Future[Any]) -> None:
    """Cancels a child task and waits until it has ended, without swallowing a cancellation
    of the caller itself (``asyncio.wait`` raises it; the child's own outcome is dropped)."""
    task.cancel()
    await asyncio.wait({task})
    if not task.cancelled() and task.exception() is not None:
        log.debug("a cancelled task ended with an error", exc_info=task.exception())
