"""Driving the engine's fold (CTX-4, CTX-5, CTX-9 … CTX-12, CTX-21).

The engine decides every round (:func:`chatmem.context.folding.fold`, a sans-I/O generator):
this module makes each summariser call through the summariser profile, stores each round's
summary as it comes, and tells the feed how far it got.  Atomicity is per round (CTX-12):
nothing is written until a round's text is in hand, and then the new summary version and its
ledger row are written in one transaction; an intermediate piece of a long message is billed
but stored nowhere.  A provider error, a timeout, a stop or a killed process therefore leave
the summary of the last stored round and the whole history.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Any, TypeVar

import anyio

from chatmem.context import folding
from chatmem.context.compaction import SummaryRound
from chatmem.context.fact_guard import FactMemo, Guarded
from chatmem.errors import ProviderError, ProviderUnreachable
from chatmem.models.client import ModelClient
from chatmem.models.clients import ModelClients
from chatmem.settings import Settings
from chatmem.store import ledger
from chatmem.store.db import Database
from chatmem.store.fact_records import FactRecord
from chatmem.store.sessions import Session
from chatmem.store.summaries import add_summary
from chatmem.store.units import work
from chatmem.turns import events
from chatmem.turns.inputs import ModelTarget, TurnInputs, price

MARKER = "Memory compressed — {n} earlier messages summarised"
PROGRESS = "Compressing memory… round {i} of ≈{n}"
T = TypeVar("T")


@dataclass(frozen=True)
class CompactionOutcome:
    """A fold, done: the summary stored last and how much it covers."""

    summary_id: str
    version: int
    through: str
    #: Messages this fold summarised, and messages the summary covers in all.
    message_count: int
    total: int
    rounds: int
    cost: float
    text: str
    focus: str | None

    def event(self, seq: int) -> events.Compaction:
        """The fold's last ``compaction`` event (``final``)."""
        return events.Compaction(
            seq,
            message=MARKER.format(n=self.total),
            count=self.message_count,
            total=self.total,
            round=self.rounds,
            rounds=self.rounds,
            final=True,
            summary_id=self.summary_id,
            summary_version=self.version,
            through=self.through,
            cost=round(self.cost, 8),
        )

    def public(self) -> dict[str, Any]:
        """The fold as Compress answers it: its last event's data, the summary and focus."""
        return {**self.event(0).data, "summary": self.text, "focus": self.focus}


async def _direct(awaitable: Awaitable[T]) -> T:
    return await awaitable


async def run_fold(
    db: Database,
    settings: Settings,
    inputs: TurnInputs,
    *,
    kind: str,
    user_id: str,
    run_id: str | None = None,
    focus: str | None = None,
    manual: bool = False,
    turn_start: str | None = None,
    clients: ModelClients,
    emit: events.Emit | None = None,
    race: Callable[[Awaitable[Any]], Awaitable[Any]] = _direct,
    facts: FactMemo | None = None,
) -> CompactionOutcome | None:
    """Fold ``inputs``' conversation as far as the engine says, storing each round.

    ``inputs.conversation`` must hold its messages in memory (``load_inputs(materialize=True)``):
    the summariser calls happen outside any transaction.  ``emit`` receives a ``compaction``
    event per round (``final`` false) and one at the end; ``race`` wraps each model call
    (the turn races it against Stop); ``facts``: the fact guard's memo (the turn service's).
    Returns None when there was nothing to fold."""
    target = inputs.summarizer
    payer = _Payer(user_id, inputs.conversation_id, run_id, kind, target)
    client = clients(target.endpoint)
    flow = folding.fold(
        inputs.conversation,
        inputs.profile,
        mode=inputs.mode,  # type: ignore[arg-type]
        turn_start=turn_start,
        tokenizer=inputs.tokenizer,
        focus=focus,
        manual=manual,
        facts=facts,
    )
    last: CompactionOutcome | None = None
    folded = 0
    spent = 0.0
    try:
        try:
            request = next(flow)
        except StopIteration:
            return None
        while True:
            answer, cost = await race(_summarise(client, target, settings, inputs, request))
            spent += cost
            if request.commit:
                folded += request.message_count
                last = await work(db, _store_round, payer, request, answer, focus, cost)
                last = replace(last, message_count=folded, cost=spent)
            else:
                await work(db, payer.record, answer, cost)
            if emit is not None:
                await emit(_progress, request, folded, last)
            try:
                request = flow.send(answer.text)
            except StopIteration:
                break
    finally:
        flow.close()
    if last is not None and emit is not None:
        await emit(last.event)
    return last


def _progress(
    seq: int, request: SummaryRound, folded: int, last: CompactionOutcome | None
) -> events.Compaction:
    """A round's ``compaction`` event (not ``final``)."""
    return events.Compaction(
        seq,
        message=PROGRESS.format(i=request.number, n=max(request.rounds, request.number)),
        count=folded,
        total=last.total if last is not None else 0,
        round=request.number,
        rounds=max(request.rounds, request.number),
        final=False,
        piece=request.piece,
        summary_id=last.summary_id if last is not None else None,
        summary_version=last.version if last is not None else None,
        through=last.through if last is not None else None,
    )


async def _summarise(
    client: ModelClient,
    target: ModelTarget,
    settings: Settings,
    inputs: TurnInputs,
    request: SummaryRound,
) -> tuple[_Answer, float]:
    try:
        with anyio.fail_after(settings.model_timeout):
            completion = await client.complete(
                list(request.prompt), max_tokens=request.max_output_tokens
            )
    except TimeoutError:
        raise ProviderUnreachable(
            "The summariser did not answer in time; memory is unchanged."
        ) from None
    text = completion.text.strip()
    if not text:
        raise ProviderError("The summariser returned an empty summary; memory is unchanged.")
    # PROV-1: a server that reports no usage is counted here (marked estimated in the
    # ledger), never recorded as free.
    usage = completion.usage
    prompt_tokens = usage.prompt_tokens if usage and usage.prompt_tokens else request.input_tokens
    completion_tokens = (
        usage.completion_tokens
        if usage and usage.completion_tokens
        else max(1, inputs.tokenizer.count(text))
    )
    estimated = not (usage and usage.prompt_tokens and usage.completion_tokens)
    cost = price(target.engine_profile.prices, prompt_tokens, completion_tokens)
    return _Answer(text, prompt_tokens, completion_tokens, estimated), cost


@dataclass(frozen=True)
class _Answer:
    """The summariser's text with its token counts."""

    text: str
    prompt_tokens: int
    completion_tokens: int
    #: PROV-1: the provider reported no usage (or part of it): counted by chatmem.
    estimated: bool = False


@dataclass(frozen=True)
class _Payer:
    """Who a summariser call is billed to, and as what (USE-1)."""

    user_id: str
    conversation_id: str
    run_id: str | None
    kind: str
    target: ModelTarget

    def record(self, session: Session, answer: _Answer, cost: float) -> None:
        ledger.record_usage(
            session,
            user_id=self.user_id,
            conversation_id=self.conversation_id,
            run_id=self.run_id,
            kind=self.kind,
            profile_id=self.target.profile_id,
            model=self.target.model,
            prompt_tokens=answer.prompt_tokens,
            completion_tokens=answer.completion_tokens,
            cost=cost,
            estimated=answer.estimated,
        )


def _store_round(
    session: Session,
    payer: _Payer,
    request: SummaryRound,
    answer: _Answer,
    focus: str | None,
    cost: float,
) -> CompactionOutcome:
    """One round's summary version and its ledger row, in one transaction (CTX-12); the
    text stored is the answer as the fact guard completes it (CTX-24), the same text the
    engine's fold goes on with."""
    guarded = request.guard.apply(answer.text) if request.guard else Guarded(answer.text)
    text = guarded.text
    row = add_summary(
        session,
        payer.conversation_id,
        first_message_id=request.first_id,
        through_message_id=request.through,
        message_count=request.covered,
        text=text,
        focus=focus,
        cost=cost,
        model=payer.target.model,
        facts=FactRecord(guarded.kept, guarded.dropped, guarded.dropped_count, guarded.held),
    )
    payer.record(session, answer, cost)
    return CompactionOutcome(
        summary_id=row.id,
        version=row.version,
        through=request.through,
        message_count=request.message_count,
        total=request.covered,
        rounds=request.number,
        cost=cost,
        text=text,
        focus=focus,
    )
