"""What a model step needs, loaded from the store in one short transaction.

:func:`load_inputs` reads the conversation through the storage core's lazy loader, resolves
the model profile (and its summariser) through the profiles room, and asks the engine for the
plan — everything the runner then uses outside the transaction.  Keeping this in one module
is deliberate: it is the one place where the turn runner meets the engine, the store and the
profiles, so a change in any of them is adapted here.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, cast

from chatmem import context as engine
from chatmem.context.history import CountedMessages
from chatmem.context.recall import recall_enabled, with_recall
from chatmem.context.values import Conversation as EngineConversation
from chatmem.context.values import Mode, Prices, Profile
from chatmem.errors import NotFound
from chatmem.models import profiles
from chatmem.models.client import ModelEndpoint
from chatmem.models.request_options import answer_limit, effective_options
from chatmem.store import ledger
from chatmem.store.db import connection_of
from chatmem.store.engine import StepConversation, load_engine_conversation, step_conversation
from chatmem.store.profiles import (
    AUTO_PROFILE,
    ProfileRecord,
    auto_planning_profile,
    visible_profile,
)
from chatmem.store.sessions import Connection, Session
from chatmem.turns.images import inline_images


@dataclass(frozen=True)
class ModelTarget:
    """A resolved model profile: where to send requests and what they cost."""

    profile_id: str | None
    model: str | None
    endpoint: ModelEndpoint | None
    engine_profile: Profile
    #: The profile's summariser (CTX-9) as stored, read with the profile row.
    summarizer_id: str | None = None
    #: The profile's recall switch (issue 17; None: the mode's default).
    recall: bool | None = None
    #: Issue 29: the profile's request parameters, used when the client sent none
    #: (``defaults``) and whatever it sent (``pins``).
    request_defaults: Mapping[str, Any] | None = None
    request_pins: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class TurnInputs:
    user_id: str
    conversation_id: str
    mode: str
    conversation: EngineConversation
    plan: Any  # chatmem.context.Plan
    tools: Sequence[Mapping[str, Any]]
    target: ModelTarget
    summarizer: ModelTarget
    #: The plan's ``used`` tokens (the estimate the ledger compares with reported usage).
    plan_tokens_used: int = 0
    #: How many MCP servers are enabled (read with the conversation): none, and a new turn
    #: need not list them.
    mcp_servers: int = 0
    #: The tokenizer the plan counted with (the profile's, calibrated, CTX-2).
    tokenizer: Any = None
    #: The built-in ``recall`` tool is offered (issue 17): it is in ``tools``.
    recall: bool = False
    #: ... by the mode's default alone: neither the conversation nor its profile chose it.
    recall_by_default: bool = False
    #: USE-4: who answers a new turn, as the feed shows it (``Answerer.public()``); set when
    #: the turn is admitted.
    answered: Mapping[str, Any] | None = None
    #: Issue 29: the request parameters each model request of the step carries — the
    #: client's, with the profile's defaults and pins (:func:`effective_options`).
    request_options: Mapping[str, Any] = field(default_factory=dict)

    @property
    def profile(self) -> Profile:
        return self.target.engine_profile

    @property
    def profile_id(self) -> str | None:
        return self.target.profile_id

    @property
    def model(self) -> str | None:
        return self.target.model

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        return price(self.target.engine_profile.prices, prompt_tokens, completion_tokens)


def price(prices: Prices | None, prompt_tokens: int, completion_tokens: int) -> float:
    if prices is None or prices.free:
        return 0.0
    return (
        prompt_tokens * prices.input_per_mtok + completion_tokens * prices.output_per_mtok
    ) / 1e6


def resolve_target(
    session: Session | Connection,
    user_id: str,
    profile_id: str | None,
    secrets: Any = None,
    *,
    read: ProfileRecord | None = None,
) -> ModelTarget:
    """The profiles room's view of ``profile_id`` (the engine profile with its summariser's
    prices, and — when ``secrets`` is given — the endpoint with the decrypted key).  A
    conversation without a profile, or whose profile is gone, plans with the defaults.
    ``read``: the profile when already read (:func:`load_inputs`)."""
    if profile_id == AUTO_PROFILE:
        # USE-4: planned with Auto's best-ranked pick; a turn passes its own resolution.
        profile_id, read = auto_planning_profile(session, user_id), None
    if profile_id is None:
        return ModelTarget(None, None, None, Profile())
    if read is not None:
        row = read if read.visible_to(user_id) else None
    else:
        row = visible_profile(session, user_id, profile_id)
    if row is None:
        return ModelTarget(None, None, None, Profile())
    summarizer = None
    if row.summarizer_profile_id:
        summarizer = visible_profile(session, user_id, row.summarizer_profile_id)
    endpoint = (
        # SEC-4: somebody else's shared profile: its errors name no URL or host.
        profiles.model_endpoint(row, secrets, conceal=row.user_id != user_id)
        if secrets is not None
        else None
    )
    return ModelTarget(
        row.id,
        row.model,
        endpoint,
        profiles.engine_profile(row, summarizer),
        row.summarizer_profile_id,
        row.recall,
        row.request_defaults,
        row.request_pins,
    )


def summarizer_target(
    session: Session | Connection, user_id: str, target: ModelTarget, secrets: Any = None
) -> ModelTarget:
    """CTX-9: the profile's cheaper summariser when it names one, else the same profile."""
    other = target.summarizer_id
    if target.profile_id is None or not other or other == target.profile_id:
        return target
    resolved = resolve_target(session, user_id, other, secrets)
    return resolved if resolved.profile_id is not None else target


#: Seconds a profile's calibration is reused before the ledger is read again (at most one
#: read per profile and period, not one per turn).  New answers count from the next read:
#: the factor only scales an estimate, and the context endpoint keys its own cache on the
#: newest ledger row.
CALIBRATION_TTL = 10.0


class Calibrations:
    """CTX-2: each profile's calibration factor — reported prompt tokens / estimated ones
    over its recent answers (1.0 without data), never less than what a recent context-length
    error taught (PROV-2: an ``overflow`` row, the count the provider named / our raw
    estimate of that request).  The engine clamps it so the estimate only ever goes up.
    Estimates stored in the ledger are raw (uncalibrated, :func:`raw_estimate`), so the
    factor does not feed on itself.

    Read from the ledger at most once per profile and ``ttl``; :meth:`learn` sets a factor
    at once.  The turn service owns one (shared by turns and the context endpoint); the
    clock is injectable."""

    def __init__(
        self, ttl: float = CALIBRATION_TTL, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._ttl = ttl
        self._clock = clock
        self._known: dict[str, tuple[float, float]] = {}  # profile id -> (factor, expiry)
        self._lock = threading.Lock()  # read and written from worker threads

    def factor(self, session: Session | Connection, profile_id: str | None) -> float:
        if profile_id is None:
            return 1.0
        now = self._clock()
        with self._lock:
            known = self._known.get(profile_id)
        if known is not None and known[1] > now:
            return known[0]
        rows = ledger.calibration_rows(session, profile_id)
        answers = [r for r in rows if r.kind == "answer"]
        reported = sum(r.prompt_tokens for r in answers)
        estimated = sum(r.estimated_prompt_tokens for r in answers)
        factor = engine.calibration_factor(estimated, reported)
        for r in rows:
            if r.kind == "overflow":
                factor = max(
                    factor, engine.calibration_factor(r.estimated_prompt_tokens, r.prompt_tokens)
                )
        self.learn(profile_id, factor)
        return factor

    def learn(self, profile_id: str, factor: float) -> None:
        with self._lock:
            self._known[profile_id] = (factor, self._clock() + self._ttl)

    def forget(self, profile_id: str) -> None:
        """The next :meth:`factor` reads the ledger again."""
        with self._lock:
            self._known.pop(profile_id, None)


def factor_of(tokenizer: Any) -> float:
    """The calibration factor a (calibrated) tokenizer applies; 1.0 for a plain one."""
    factor = getattr(tokenizer, "factor", 1.0)
    return float(factor) if isinstance(factor, (int, float)) else 1.0


def raw_estimate(inputs: TurnInputs) -> int:
    """The plan's ``used`` without the calibration it was counted with (what the ledger
    compares the provider's report with, CTX-2)."""
    if inputs.plan_tokens_used <= 0:
        return 0
    return max(1, math.ceil(inputs.plan_tokens_used / factor_of(inputs.tokenizer)))


#: Tokens per message added to the floor an overflow teaches (see :func:`learn_overflow`).
OVERFLOW_SLACK_PER_MESSAGE = 16


def learn_overflow(
    session: Session,
    inputs: TurnInputs,
    named_tokens: int | None,
    run_id: str | None,
    calibrations: Calibrations,
) -> float:
    """PROV-2: the provider refused ``inputs``' request as too long.  Records what that
    teaches as an ``overflow`` ledger row and returns the profile's new factor, in effect at
    once (the cache is updated): the next plan counts that request as at least the size the
    provider named, and at least one token more than the window leaves for it (so the same
    request is never admitted again, even when the provider named no size or a size that
    would seem to fit: then its window is smaller than the profile says)."""
    profile = inputs.profile
    budget = profile.context_window - profile.answer_reserve
    raw = raw_estimate(inputs)
    # The request as planned counted ``used`` <= budget, and it did not fit: the same request
    # must count more than ``budget`` from now on.  The slack covers what rounding and the
    # unscaled per-message overhead can take off a recount (a few tokens per message).
    parts = len(inputs.plan.messages) + 1 if inputs.plan is not None else 1
    floor = budget + 1 + OVERFLOW_SLACK_PER_MESSAGE * parts
    reported = max(named_tokens or 0, floor)
    ledger.record_usage(
        session,
        user_id=inputs.user_id,
        conversation_id=inputs.conversation_id,
        run_id=run_id,
        kind="overflow",
        profile_id=inputs.profile_id,
        model=inputs.model,
        prompt_tokens=reported,
        completion_tokens=0,
        cost=0.0,
        estimated_prompt_tokens=raw,
        estimated=False,
    )
    if inputs.profile_id is None:
        return 1.0
    factor = max(factor_of(inputs.tokenizer), engine.calibration_factor(raw, reported))
    calibrations.learn(inputs.profile_id, factor)
    return factor


def calibrated_tokenizer(
    session: Session | Connection, target: ModelTarget, calibrations: Calibrations | None
) -> Any:
    """The profile's tokenizer, scaled up when the provider reports more than we estimate
    (without ``calibrations``, read from the ledger now)."""
    base = engine.get_tokenizer(target.engine_profile.tokenizer)
    known = calibrations or Calibrations(ttl=0)
    return engine.calibrated(base, known.factor(session, target.profile_id))


def load_inputs(
    session: Session | Connection,
    conversation_id: str,
    tools: Sequence[Mapping[str, Any]] = (),
    turn_start: str | None = None,
    *,
    draft: str | None = None,
    user_id: str | None = None,
    with_plan: bool = True,
    secrets: Any = None,
    profile_override: str | None = None,
    live_only: bool = False,
    materialize: bool = False,
    calibrations: Calibrations | None = None,
    draft_files: Sequence[str] | None = None,
    choose: Callable[[Connection, StepConversation], tuple[str | None, Mapping[str, Any]]]
    | None = None,
    request_options: Mapping[str, Any] | None = None,
) -> TurnInputs:
    """The inputs of one model step.  With ``user_id`` the conversation must be theirs
    (STORE-1); with ``live_only`` it must not be archived either (a new turn).  With
    ``materialize`` the messages are read into memory (a fold uses them after the
    transaction; otherwise they are a lazy view of it).  ``draft_files``: the files the
    draft is sent with — then only those of the images not attached to a message yet ride
    with it (PROJ-2).  ``choose(connection, conversation)`` (a new turn, USE-3/USE-4): the
    profile that answers instead of the conversation's (None: its own) and who answers as
    the feed shows it (``answered``).  ``request_options``: the client's (issue 29), merged
    with the profile's defaults and pins; an answer limit above the profile's answer reserve
    is this step's reserve."""
    # One connection for every statement below (asking the session for it each time costs
    # more than most of the statements).
    connection = connection_of(session)
    row = step_conversation(connection, conversation_id)
    if row is None or (user_id is not None and row.user_id != user_id):
        raise NotFound("conversation")
    if live_only and row.archived_at is not None:
        raise NotFound("conversation")
    answered: dict[str, Any] | None = None
    if choose is not None:
        instead, shown = choose(connection, row)
        profile_override, answered = instead, dict(shown)
    if profile_override is None or profile_override == row.profile_id:
        target = resolve_target(connection, row.user_id, row.profile_id, secrets, read=row.profile)
    else:
        target = resolve_target(connection, row.user_id, profile_override, secrets)
    options = effective_options(target.request_defaults, request_options, target.request_pins)
    target = _reserving(target, answer_limit(options))
    profile = target.engine_profile
    tokenizer = calibrated_tokenizer(connection, target, calibrations)
    mode = engine.effective_mode(profile, cast(Mode, row.mode))
    recall = recall_enabled(mode, row.recall, target.recall)
    tools = with_recall(tools, recall)
    conversation = load_engine_conversation(
        connection,
        conversation_id,
        tokenizer=profile.tokenizer,
        instructions=row.instructions,
        tools=[dict(t) for t in tools],
        bounds=(row.first_seq, row.last_seq, row.hidden_count),
        has_summary=bool(row.summaries),
        has_files=bool(row.files),
        calibration=factor_of(tokenizer),
        project_id=row.project_id,
        has_app_context=row.app_context,
        with_facts=True,  # CTX-24: a turn or Compress now may fold, and the guard carries them
        has_pinned_facts=row.pinned_facts,
    )
    if draft_files is not None:
        chosen = set(draft_files)
        conversation = replace(
            conversation,
            files=[
                f
                for f in conversation.files
                if not (f.image and f.message_id is None and f.id not in chosen)
            ],
        )
    if materialize:
        messages = CountedMessages(
            conversation.messages, lambda m: engine.count_message(m, tokenizer)
        )
        conversation = replace(conversation, messages=messages)
    plan = (
        engine.plan(
            conversation,
            profile,
            mode=mode,
            draft=draft,
            turn_start=turn_start,
            tokenizer=tokenizer,
        )
        if with_plan
        else None
    )
    if plan is not None and secrets is not None:  # a model call: images as data URLs
        plan = inline_images(connection, plan)
    # The conversation's messages are a lazy view that reads through this session: nothing
    # of it may be touched after the transaction.  The runner uses only plain data from the
    # plan (messages, token counts, the compaction request).
    return TurnInputs(
        user_id=row.user_id,
        conversation_id=conversation_id,
        mode=mode,
        conversation=conversation,
        plan=plan,
        tools=list(tools),
        target=target,
        summarizer=summarizer_target(connection, row.user_id, target, secrets),
        plan_tokens_used=int(plan.tokens.used) if plan is not None else 0,
        mcp_servers=row.mcp_servers,
        tokenizer=tokenizer,
        recall=recall,
        recall_by_default=recall and row.recall is None and target.recall is None,
        answered={**answered, "profile_id": target.profile_id} if answered is not None else None,
        request_options=options,
    )


def _reserving(target: ModelTarget, limit: int | None) -> ModelTarget:
    """Issue 29: an answer limit (``max_tokens``) larger than the profile's answer reserve
    is this request's reserve, so the plan leaves the room the provider will want for the
    answer (and refuses, ``does_not_fit``, when the history cannot be made to fit beside it);
    a smaller one leaves the profile's reserve."""
    profile = target.engine_profile
    if limit is None or limit <= profile.answer_reserve:
        return target
    return replace(target, engine_profile=replace(profile, answer_reserve=limit))
