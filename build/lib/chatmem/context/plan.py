"""The plan: exactly what the next request sends, what it costs, and the state of every message.

Theory of operation
-------------------
:func:`plan` is a pure function of its inputs (SPEC §2): same conversation, profile, mode and
draft, same plan.  It never calls a model, reads a file or the environment.

1. The mode actually used is :func:`~chatmem.context.modes.effective_mode` (CTX-7).
2. Fixed parts are counted: instructions, tool definitions (CTX-1), an app's model context
   (APPS-3, its cached count), the summary when the mode sends it (CTX-9), the pinned facts
   (CTX-24, their cached count: in every mode, never folded), pinned files (CTX-16), the
   current turn (``turn_start`` onwards, always sent, TURN-5/CTX-13) and the draft (the
   newest user message, CTX-17).
3. The mode picks history newest-first within ``window - answer reserve - fixed parts``
   (``modes.py``), using cached per-message counts (CTX-2): the walk stops at the summary
   boundary or when the budget is spent, so cost follows the window, not the history.
4. Auto files ride with their message: in memory when it is (CTX-16).
5. The breakdown (CTX-18): ``used`` is everything sent; ``used + reserve + free = window``
   with ``free`` never below zero; ``level`` follows ``used / window`` (CTX-17,
   :data:`LEVELS`).  The price is ``used`` at the input price; the answer is extra.
6. Compaction (CTX-4, CTX-5, CTX-10, CTX-21): in ``economy`` and ``full`` the mode's policy
   names a *floor* (the last K pairs, the last N messages) when it wants a fold, and a fold is
   mandatory when the history after the summary does not fit.  The verbatim tail is then what
   fits, newest first, above the floor beside a new summary at its cap
   (:func:`~chatmem.context.compaction.new_summary_tokens`): the policy shrinks down to the
   current turn alone rather than refuse.  The plan shows the request *as it will be sent
   after the fold* (the folded messages ``summarized``, the summary counted at its cap) and
   carries a :class:`CompactionRequest`: the whole fold, its rounds and price.  The caller
   folds (``folding.fold``), then plans again.
   A tool result of the turn that the window cannot take even with everything before the
   turn folded away (CTX-13) is left out with its call (CTX-20) and the plan does not fit:
   :class:`OversizedResult` names it, and the refusal names the tool, not the question.
   Later turns see that pair as ordinary history (folded, excluded or out of memory).
   Binary attachments (PROV-4) are never sent: a placeholder in their message stands in.
7. The invariant (CTX-21): ``fits`` is true exactly when the request as planned (after the
   fold) is within ``window - answer reserve``; admission is ``fits``, and a refusal's
   ``needed`` is ``used + reserve`` > ``window`` (:meth:`Plan.require_fit`, CTX-19).  A plan
   that does not fit is ``red`` and counts only what must be sent.  Nothing is ever dropped
   silently: what is not sent is ``summarized`` or ``out_of_memory``.

Statuses (CTX-14) are a :class:`~chatmem.context.status.StatusMap`: explicit for the walked
tail, ranges for the rest, expanded on demand.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from chatmem.context.attachments import (
    auto_file_tokens,
    file_block,
    file_statuses,
    file_tokens,
    image_report,
)
from chatmem.context.compaction import (
    PENDING_SUMMARY,
    SUMMARY_HEADER,
    CompactionRequest,
    new_summary_tokens,
    summary_message,
    summary_tokens,
)
from chatmem.context.fold_plan import Fold, after_fold, fold_floor, fold_request, trim_excluded
from chatmem.context.history import PairWalker, TokensOf, find_backward
from chatmem.context.images import (
    DRAFT,
    Rider,
    rider_tokens,
    riders,
    with_riders,
)
from chatmem.context.modes import (
    SUMMARY_MODES,
    Selection,
    effective_mode,
    manual_cut,
    render_pair,
    select_pairs,
)
from chatmem.context.oversized import oversized_results, summary_floor
from chatmem.context.plan_result import (
    Breakdown,
    CompactionDecision,
    OversizedResult,
    Plan,
    level_for,
)
from chatmem.context.policy import full_threshold
from chatmem.context.prices import PriceEstimate, cost, price_for
from chatmem.context.status import StatusMap
from chatmem.context.tokens import (
    MESSAGE_OVERHEAD,
    Tokenizer,
    count_message,
    count_tools,
    get_tokenizer,
)
from chatmem.context.values import (
    AppContext,
    Conversation,
    File,
    FileStatus,
    Message,
    MessageStatus,
    Mode,
    PinnedFacts,
    Profile,
    Summary,
)
from chatmem.context.window import assemble_window


def plan(
    conversation: Conversation,
    profile: Profile,
    *,
    mode: Mode,
    draft: str | None = None,
    turn_start: str | None = None,
    tokenizer: Tokenizer | None = None,
) -> Plan:
    """Plan the next request of ``conversation`` under ``profile`` in ``mode``.

    ``draft`` is the message being typed (counted as the newest user message; it has no
    status).  ``turn_start`` is the id of the first stored message of a turn in progress:
    it and everything after it are always sent."""
    return _plan(conversation, profile, mode, draft, turn_start, tokenizer)


@dataclass(frozen=True, slots=True)
class _Frame:
    """What every step of one plan reads: the inputs and the numbers derived from them."""

    conversation: Conversation
    profile: Profile
    mode: Mode
    tok: Tokenizer
    tokens_of: TokensOf
    history_stop: int  # the current turn starts here (the history's end)
    summary: Summary | None  # the summary, when the mode sends it
    budget: int  # window - answer reserve

    @property
    def messages(self) -> Sequence[Message]:
        return self.conversation.messages

    @property
    def through(self) -> str | None:
        return self.summary.through if self.summary is not None else None


@dataclass(frozen=True, slots=True)
class _Fixed:
    """The parts counted before any history is chosen (step 2), in tokens."""

    instructions: int
    tools: int
    summary: int  # the current summary, when the mode sends it
    draft: int
    pinned: int
    apps: int  # an app's model context (APPS-3)
    facts: int  # the pinned facts (CTX-24)

    @property
    def always(self) -> int:
        """What every request carries before history and the turn (CTX-21)."""
        return self.instructions + self.tools + self.apps + self.facts + self.draft + self.pinned


@dataclass(slots=True)
class _Turn:
    """The current turn as sent (always, TURN-5/CTX-13) and the images riding with it and
    with the draft."""

    sent: list[dict[str, Any]] = field(default_factory=list)
    statuses: list[MessageStatus] = field(default_factory=list)
    tokens: int = 0
    riders: int = 0
    oversized: tuple[OversizedResult, ...] = ()


@dataclass(slots=True)
class _Memory:
    """What the mode took from history, and the fold when one is planned."""

    chosen: Selection
    summary_tokens: int  # the summary as sent: the current one, or a new one at its cap
    draft_tokens: int
    window_tail: list[dict[str, Any]] = field(default_factory=list)  # ``window`` mode only
    fold: Fold | None = None


def _plan(
    conversation: Conversation,
    profile: Profile,
    requested: Mode,
    draft: str | None,
    turn_start: str | None,
    tokenizer: Tokenizer | None,
    focus: str | None = None,
) -> Plan:
    frame = _frame(conversation, profile, requested, turn_start, tokenizer)
    fixed = _fixed_parts(frame, draft)
    # PROJ-2: images ride with their messages (none in window mode: text only).  Images not
    # attached to a message yet ride with the draft (the question they go with).
    attached = riders(conversation.files, profile, frame.tok) if frame.mode != "window" else {}
    draft_riders = attached.pop(DRAFT, [])
    if draft is None:
        draft_riders = []
    rider_toks = rider_tokens(attached)
    turn = _current_turn(frame, fixed, attached, rider_toks, draft_riders)
    memory = _memory(frame, fixed, turn, draft, attached, rider_toks)
    if draft_riders:
        attached[DRAFT] = draft_riders
    files = _files_sent(frame, memory, turn, attached)
    sent = _request_messages(frame, memory, turn, files.sent, draft, draft_riders)
    breakdown = _breakdown(
        frame,
        fixed,
        summary=memory.summary_tokens,
        messages=memory.chosen.tokens + turn.tokens + memory.draft_tokens + files.placeholders,
        files=sum(file_tokens(f, frame.tok) for f in files.sent),
        images=files.image_tokens,
    )
    fits = not memory.chosen.overflow and breakdown.used <= frame.budget and not turn.oversized
    request = _fold_request(frame, memory, running_tokens=fixed.summary, focus=focus)
    return Plan(
        mode=frame.mode,
        fits=fits,
        messages=tuple(sent),
        status=_statuses(frame, memory, turn),
        files=files.statuses,
        tokens=breakdown,
        level=level_for(breakdown.used, breakdown.window) if fits else "red",
        compaction=CompactionDecision(
            needed=request is not None, threshold=full_threshold(profile), request=request
        ),
        price=_price(profile, breakdown.used, request),
        oversized=turn.oversized,
        images=files.images,
    )


@dataclass(frozen=True, slots=True)
class _Files:
    """Step 4: what is sent of the files and images, and their statuses (CTX-16, PROJ-2)."""

    statuses: dict[str, FileStatus]
    sent: list[File]  # the text files sent, in order
    images: dict[str, dict[str, Any]]  # each image's entry in the plan
    image_tokens: int  # of the images sent
    placeholders: int  # tokens of the placeholders sent in the stead of images


def _files_sent(
    frame: _Frame, memory: _Memory, turn: _Turn, attached: Mapping[str, Sequence[Rider]]
) -> _Files:
    """Step 4: auto files and images are in memory when their message is (or, attached to
    no message, with the draft)."""
    in_memory_ids = set(memory.chosen.in_memory_ids)
    in_memory_ids.update(
        frame.messages[frame.history_stop + k].id
        for k, s in enumerate(turn.statuses)
        if s == "in_memory"
    )
    files = frame.conversation.files
    images, image_tokens, placeholders = image_report(
        files, attached, in_memory_ids | {DRAFT}, frame.mode
    )
    statuses, sent = file_statuses(files, frame.mode, images, in_memory_ids)
    return _Files(statuses, sent, images, image_tokens, placeholders)


def _fold_request(
    frame: _Frame, memory: _Memory, *, running_tokens: int, focus: str | None
) -> CompactionRequest | None:
    """Step 6: the planned fold as a request, its rounds and price (None: no fold)."""
    if memory.fold is None:
        return None
    return fold_request(
        frame.messages,
        memory.fold,
        frame.profile,
        frame.tok,
        running_tokens=running_tokens,
        focus=focus,
        tokens_of=frame.tokens_of,
    )


def _frame(
    conversation: Conversation,
    profile: Profile,
    requested: Mode,
    turn_start: str | None,
    tokenizer: Tokenizer | None,
) -> _Frame:
    """Step 1: the mode actually used (CTX-7), the tokenizer, where the turn starts."""
    tok = tokenizer if tokenizer is not None else get_tokenizer(profile.tokenizer)
    mode = effective_mode(profile, requested)
    messages = conversation.messages
    n = len(messages)

    def tokens_of(message: Message) -> int:
        return count_message(message, tok)

    return _Frame(
        conversation=conversation,
        profile=profile,
        mode=mode,
        tok=tok,
        tokens_of=tokens_of,
        history_stop=n if turn_start is None else find_backward(messages, turn_start, n),
        summary=conversation.summary if mode in SUMMARY_MODES else None,
        budget=profile.context_window - profile.answer_reserve,
    )


def _fixed_parts(frame: _Frame, draft: str | None) -> _Fixed:
    """Step 2: instructions, tool definitions (CTX-1), the summary the mode sends (CTX-9),
    the draft (CTX-17) and the files sent with every request: pinned ones, and (but in
    ``off``) those attached to the conversation rather than to a message (CTX-16)."""
    conversation, tok = frame.conversation, frame.tok
    pinned = (
        f
        for f in conversation.files
        if not f.binary
        and (
            f.state == "pinned"
            or (f.state == "auto" and f.message_id is None and frame.mode != "off")
        )
    )
    return _Fixed(
        instructions=sum(
            MESSAGE_OVERHEAD + tok.count(text)
            for text in (conversation.project_instructions, conversation.instructions)
            if text
        ),
        tools=count_tools(conversation.tools, tok),
        summary=summary_tokens(frame.summary, tok) if frame.summary is not None else 0,
        draft=MESSAGE_OVERHEAD + tok.count(draft) if draft else 0,
        pinned=sum(file_tokens(f, tok) for f in pinned),
        apps=_app_context_tokens(conversation.app_context, tok),
        facts=_pinned_facts_tokens(conversation.pinned_facts, tok),
    )


def _app_context_tokens(context: AppContext | None, tok: Tokenizer) -> int:
    """APPS-3: the app context's cached count (counted here only when none was cached)."""
    if context is None:
        return 0
    return (
        context.tokens if context.tokens is not None else MESSAGE_OVERHEAD + tok.count(context.text)
    )


def _pinned_facts_tokens(facts: PinnedFacts | None, tok: Tokenizer) -> int:
    """CTX-24: the pinned facts' cached count (counted here only when none was cached)."""
    if facts is None or not facts.text:
        return 0
    return facts.tokens if facts.tokens is not None else MESSAGE_OVERHEAD + tok.count(facts.text)


def _current_turn(
    frame: _Frame,
    fixed: _Fixed,
    attached: Mapping[str, Sequence[Rider]],
    rider_toks: Mapping[str, int],
    draft_riders: Sequence[Rider],
) -> _Turn:
    """Step 2, the turn in progress: always sent, rendered like any pair (CTX-20 keeps calls
    with results), with its images and the draft's (PROJ-2).  A tool result the window cannot
    take even with the rest folded away is left out with its call, and the turn is refused
    naming it (CTX-13: not sent, but counted, so the refusal says what the turn would need)."""
    turn = _Turn(riders=sum(r.tokens for r in draft_riders))
    messages, stop, n = frame.messages, frame.history_stop, len(frame.messages)
    if stop >= n or frame.mode == "window":
        return turn
    turn.sent, turn.statuses = render_pair(messages, stop, n, riders=attached)
    turn.tokens = sum(
        m.tokens if m.tokens is not None else frame.tokens_of(m) for m in messages[stop:n]
    )
    if rider_toks:
        turn.riders += sum(rider_toks.get(m.id, 0) for m in messages[stop:n])
    fixed_tokens = fixed.always + turn.riders
    most = max(new_summary_tokens(frame.profile), fixed.summary)
    if turn.tokens <= frame.budget - fixed_tokens - (most if frame.mode in SUMMARY_MODES else 0):
        return turn
    floor_tokens = summary_floor(
        frame.conversation, frame.profile, frame.mode, stop, fixed.summary, frame.tokens_of
    )
    room = frame.budget - fixed_tokens - floor_tokens
    if turn.tokens <= room:
        return turn
    cut = oversized_results(
        messages,
        stop,
        room=room,
        turn_tokens=turn.tokens,
        tokens_of=frame.tokens_of,
        needed=fixed_tokens + floor_tokens + turn.tokens + frame.profile.answer_reserve,
        riders=attached,
    )
    if cut is not None:
        turn.oversized, turn.sent, turn.statuses, _left = cut
    return turn


def _memory(
    frame: _Frame,
    fixed: _Fixed,
    turn: _Turn,
    draft: str | None,
    attached: Mapping[str, Sequence[Rider]],
    rider_toks: Mapping[str, int],
) -> _Memory:
    """Step 3: the history the mode takes (``modes.py``, ``window.py``); in ``window`` mode the
    assembly also renders the turn and the draft."""
    if frame.mode == "off":
        return _Memory(Selection(lo=frame.history_stop), fixed.summary, fixed.draft)
    if frame.mode == "window":
        chosen, tail, turn.statuses, turn.tokens, draft_tokens = assemble_window(
            frame.messages, frame.history_stop, draft, frame.profile, frame.tok, frame.tokens_of
        )
        return _Memory(chosen, fixed.summary, draft_tokens, window_tail=tail)
    # CTX-21: what every request of this turn carries, whatever the memory holds.
    must = fixed.always + turn.tokens + turn.riders
    riding = auto_file_tokens(frame.conversation.files, frame.tok)
    for mid, extra in rider_toks.items():  # step 4: auto files and images ride with their message
        riding[mid] = riding.get(mid, 0) + extra
    return _summary_memory(frame, fixed, turn, must, riding, attached)


def _summary_memory(
    frame: _Frame,
    fixed: _Fixed,
    turn: _Turn,
    must: int,
    auto_file_tokens: Mapping[str, int],
    attached: Mapping[str, Sequence[Rider]],
) -> _Memory:
    """Steps 3 and 6 in ``economy`` and ``full``: the pairs after the summary newest first,
    then the fold the mode's policy or the window wants (CTX-4, CTX-5, CTX-21)."""
    profile, history_stop = frame.profile, frame.history_stop
    chosen = select_pairs(
        frame.messages,
        history_stop,
        through=frame.through,
        available=frame.budget - must - fixed.summary,
        tokens_of=frame.tokens_of,
        file_tokens=auto_file_tokens,
        riders=attached,
    )
    memory = _Memory(chosen, fixed.summary, fixed.draft)
    floor = fold_floor(
        frame.mode,
        chosen,
        profile,
        frame.messages,
        history_stop,
        frame.through,
        frame.tokens_of,
        request_tokens=must + fixed.summary + chosen.tokens + profile.answer_reserve,
    )
    if floor is not None and not turn.oversized:
        folded = after_fold(
            frame.conversation,
            profile,
            frame.mode,
            chosen,
            floor,
            budget=frame.budget - must,
            history_stop=history_stop,
            current_summary_tokens=fixed.summary,
            tokens_of=frame.tokens_of,
            auto_file_tokens=auto_file_tokens,
            riders=attached,
        )
        if folded is not None:
            memory.fold, memory.chosen = folded
            memory.summary_tokens = new_summary_tokens(profile)
    if memory.fold is None and chosen.overflow:
        # No fold can make room.  When even a summary at its cap does not fit beside what
        # must be sent, the turn is refused and the refusal counts both (CTX-19, CTX-21:
        # needed > available).  Otherwise (the current summary leaves the history no room)
        # the turn goes with the summary and no history: every earlier message is shown out
        # of memory, nothing is cut silently.
        memory.chosen = Selection(lo=history_stop)
        if must + new_summary_tokens(profile) > frame.budget:
            memory.summary_tokens = max(memory.summary_tokens, new_summary_tokens(profile))
    return memory


def _request_messages(
    frame: _Frame,
    memory: _Memory,
    turn: _Turn,
    sent_files: Sequence[File],
    draft: str | None,
    draft_riders: Sequence[Rider],
) -> list[dict[str, Any]]:
    """The request as sent: instructions, an app's context, the summary (or the one the fold
    will write), the pinned facts, files, the history, the turn and the draft."""
    conversation, role = frame.conversation, frame.profile.instructions_role
    sent: list[dict[str, Any]] = []
    if conversation.project_instructions:
        sent.append({"role": role, "content": conversation.project_instructions})
    if conversation.instructions:
        sent.append({"role": role, "content": conversation.instructions})
    if conversation.app_context is not None:  # APPS-3: after the instructions
        sent.append({"role": role, "content": conversation.app_context.text})
    if memory.fold is not None:
        pending = PENDING_SUMMARY.format(n=memory.fold.cut - memory.fold.start)
        sent.append({"role": role, "content": f"{SUMMARY_HEADER}\n\n{pending}"})
    elif frame.summary is not None:
        sent.append(summary_message(frame.summary, role))
    facts = conversation.pinned_facts
    if facts is not None and facts.text:  # CTX-24: with the summary, in every mode
        sent.append({"role": role, "content": facts.text})
    sent.extend(file_block(f, role) for f in sent_files)
    sent.extend(memory.chosen.sent)
    if frame.mode == "window":
        sent.extend(memory.window_tail)
        return sent
    sent.extend(turn.sent)
    if draft_riders:
        sent.append({"role": "user", "content": with_riders(draft or "", draft_riders, "user")})
    elif draft:
        sent.append({"role": "user", "content": draft})
    return sent


def _breakdown(
    frame: _Frame, fixed: _Fixed, *, summary: int, messages: int, files: int, images: int
) -> Breakdown:
    """Step 5 (CTX-18): ``used`` is everything sent; ``used + reserve + free = window``."""
    used = (
        fixed.instructions
        + fixed.tools
        + fixed.apps
        + fixed.facts
        + summary
        + messages
        + files
        + images
    )
    window, reserve = frame.profile.context_window, frame.profile.answer_reserve
    return Breakdown(
        instructions=fixed.instructions,
        tools=fixed.tools,
        summary=summary,
        messages=messages,
        files=files,
        images=images,
        apps=fixed.apps,
        facts=fixed.facts,
        reserve=reserve,
        free=max(0, window - used - reserve),
        used=used,
        window=window,
    )


def _price(profile: Profile, used: int, request: CompactionRequest | None) -> PriceEstimate:
    """Step 5: ``used`` at the input price (the answer is extra), and the fold's price."""
    prices = price_for(profile)
    return PriceEstimate(
        next_request=0.0 if prices.free else cost(used, prices.input_per_mtok),
        compaction=request.estimated_cost if request is not None else 0.0,
        free=prices.free,
    )


def _statuses(frame: _Frame, memory: _Memory, turn: _Turn) -> StatusMap:
    """CTX-14: explicit for the walked tail and the turn, ranges for the rest."""
    chosen = memory.chosen
    return StatusMap(
        frame.messages,
        chosen.lo,
        [*chosen.explicit, *turn.statuses],
        summary_through=frame.through,
        boundary=chosen.boundary,
        summarized_below=memory.fold.cut if memory.fold is not None else None,
    )


def manual_fold(
    conversation: Conversation,
    profile: Profile,
    tok: Tokenizer,
    *,
    mode: Mode,
    focus: str | None = None,
    turn_start: str | None = None,
) -> CompactionRequest | None:
    """CTX-11 "Compress now": everything after the summary but the last complete pair, or
    (CTX-21) the fold the next request needs when that is more; None: nothing to compress."""
    messages = conversation.messages
    summary = conversation.summary
    stop = (
        len(messages) if turn_start is None else find_backward(messages, turn_start, len(messages))
    )
    through = summary.through if summary is not None else None
    walker = PairWalker(messages, stop, through, lambda m: count_message(m, tok))
    pairs = list(walker)
    cut = manual_cut(pairs)
    automatic = _plan(conversation, profile, mode, None, turn_start, tok, focus).compaction.request
    if cut is None:
        return automatic
    if automatic is not None and automatic.covered >= cut:
        return automatic
    start = (walker.boundary if walker.boundary is not None else -1) + 1
    cut = trim_excluded(messages, start, cut)
    if cut <= start:
        return automatic
    running = summary_tokens(summary, tok) if summary is not None else 0
    return fold_request(
        messages,
        Fold(start, cut),
        profile,
        tok,
        running_tokens=running,
        focus=focus,
        tokens_of=lambda m: count_message(m, tok),
    )


def compaction_request(
    conversation: Conversation,
    profile: Profile,
    *,
    mode: Mode,
    focus: str | None = None,
    manual: bool = False,
    tokenizer: Tokenizer | None = None,
) -> CompactionRequest | None:
    """What to summarise now: the fold the next request needs (CTX-4, CTX-5, CTX-21), or
    with ``manual`` what "Compress now" folds (CTX-11); None when there is nothing to fold.
    The rounds themselves come from :func:`chatmem.context.folding.fold`."""
    tok = tokenizer if tokenizer is not None else get_tokenizer(profile.tokenizer)
    if manual:
        return manual_fold(
            conversation, profile, tok, mode=effective_mode(profile, mode), focus=focus
        )
    return _plan(conversation, profile, mode, None, None, tok, focus).compaction.request
