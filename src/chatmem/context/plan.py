"""The plan: exactly what the next request sends, what it costs, and the state of every message.

Theory of operation
-------------------
:func:`plan` is a pure function of its inputs (SPEC §2): same conversation, profile, mode and
draft, same plan.  It never calls a model, reads a file or the environment.

1. The mode actually used is :func:`~chatmem.context.modes.effective_mode` (CTX-7).
2. Fixed parts are counted: instructions, tool definitions (CTX-1), the summary when the mode
   sends it (CTX-9), pinned files (CTX-16), the current turn (``turn_start`` onwards, always
   sent, TURN-5/CTX-13) and the draft (the newest user message, CTX-17).
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

from chatmem.context.compaction import (
    PENDING_SUMMARY,
    SUMMARY_HEADER,
    CompactionRequest,
    estimate_fold,
    new_summary_tokens,
    summary_cap,
    summary_message,
    summary_tokens,
)
from chatmem.context.errors import DoesNotFit, ToolResultTooLarge
from chatmem.context.history import PairWalker, TokensOf, find_backward, tokens_between
from chatmem.context.images import (
    DRAFT,
    EXCLUDED,
    MESSAGE_NOT_SENT,
    NOT_ACCEPTED,
    NOT_ATTACHED,
    WINDOW_MODE,
    Rider,
    rider_tokens,
    riders,
    with_riders,
)
from chatmem.context.modes import (
    MIN_UNLOAD_FRACTION,
    SUMMARY_MODES,
    Selection,
    economy_floor,
    effective_mode,
    full_floor,
    full_threshold,
    manual_cut,
    render_pair,
    select_pairs,
)
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
    Conversation,
    File,
    FileStatus,
    InstructionsRole,
    Level,
    Message,
    MessageStatus,
    Mode,
    Profile,
)
from chatmem.context.window import assemble_window

# CTX-17: (upper bound of used/window, level), checked in order; above the last bound: red.
LEVELS: tuple[tuple[float, Level], ...] = (
    (0.5, "muted"),  # below 50 %
    (0.75, "light"),  # 50 % to 75 %
)


def level_for(used: int, window: int) -> Level:
    share = used / window if window > 0 else 1.0
    if share < LEVELS[0][0]:
        return LEVELS[0][1]
    if share <= LEVELS[1][0]:
        return LEVELS[1][1]
    return "red"


@dataclass(frozen=True)
class Breakdown:
    """CTX-18's token breakdown of the next request."""

    instructions: int
    tools: int
    summary: int
    messages: int
    files: int
    images: int
    reserve: int
    free: int
    used: int
    window: int


@dataclass(frozen=True)
class CompactionDecision:
    needed: bool
    threshold: int
    request: CompactionRequest | None = None

    def to_dict(self) -> dict[str, Any]:
        request = self.request
        return {
            "needed": self.needed,
            "threshold": self.threshold,
            "messages": request.message_count if request is not None else 0,
            "covered": request.covered if request is not None else 0,
            "rounds": request.rounds if request is not None else 0,
        }


@dataclass(frozen=True)
class OversizedResult:
    """CTX-13: a tool result of the turn in progress that cannot be sent even with everything
    else folded away.  The plan leaves it out with its call (CTX-20) and does not fit;
    ``needed`` is the smallest request with it (answer reserve included), above the window."""

    message_id: str
    tool_call_id: str
    tool: str
    tokens: int
    needed: int


@dataclass(frozen=True)
class Plan:
    """What the next request sends and why.  ``messages`` are OpenAI chat messages."""

    mode: Mode
    #: The request fits the window, after the planned fold when there is one (CTX-21):
    #: admission is exactly this.
    fits: bool
    messages: tuple[dict[str, Any], ...]
    status: Mapping[str, MessageStatus]
    files: Mapping[str, FileStatus]
    tokens: Breakdown
    level: Level
    compaction: CompactionDecision
    price: PriceEstimate = field(default_factory=lambda: PriceEstimate(0.0))
    #: Tool results of the turn too large to send (CTX-13); ``fits`` is then false.
    oversized: tuple[OversizedResult, ...] = ()
    #: PROJ-2: each attached image's status, tokens and, when it is not sent, why.
    images: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The CONTRACT's plan JSON (statuses fully expanded)."""
        t = self.tokens
        return {
            "mode": self.mode,
            "fits": self.fits,
            "messages": [dict(m) for m in self.messages],
            "status": dict(self.status.items()),
            "files": dict(self.files),
            "tokens": {
                "instructions": t.instructions,
                "tools": t.tools,
                "summary": t.summary,
                "messages": t.messages,
                "files": t.files,
                "images": t.images,
                "reserve": t.reserve,
                "free": t.free,
                "used": t.used,
                "window": t.window,
            },
            "level": self.level,
            "compaction": self.compaction.to_dict(),
            "price": {
                "next_request": self.price.next_request,
                "compaction": self.price.compaction,
                "currency": self.price.currency,
                "free": self.price.free,
            },
            # PROJ-2, only when images are attached: each one's status, tokens and reason.
            **({"images": {k: dict(v) for k, v in self.images.items()}} if self.images else {}),
        }

    def require_fit(self) -> None:
        """Raise ``DoesNotFit`` (CTX-19) unless the request fits the window as planned; when
        a tool result of the turn is what cannot fit, ``ToolResultTooLarge`` names it."""
        if self.oversized:
            first = self.oversized[0]
            raise ToolResultTooLarge(
                first.tool,
                first.tokens,
                first.message_id,
                needed=first.needed,
                available=self.tokens.window,
            )
        if not self.fits:
            raise DoesNotFit(
                needed=self.tokens.used + self.tokens.reserve, available=self.tokens.window
            )


def file_block(file: File, role: InstructionsRole = "system") -> dict[str, str]:
    """How a file is sent: a message with its name, in the instructions' role (CTX-16)."""
    return {"role": role, "content": f"File {file.name}:\n\n{file.content}"}


def _file_tokens(file: File, tokenizer: Tokenizer) -> int:
    if file.binary:
        return 0  # never sent: its message's placeholder stands for it (PROV-4)
    if file.tokens is not None:
        return file.tokens
    return MESSAGE_OVERHEAD + tokenizer.count(file_block(file)["content"])


def _auto_file_tokens(files: Sequence[File], tokenizer: Tokenizer) -> dict[str, int]:
    """Message id -> tokens of the auto files attached to it (they travel with it)."""
    out: dict[str, int] = {}
    for f in files:
        if f.state == "auto" and f.message_id is not None and not f.binary:
            out[f.message_id] = out.get(f.message_id, 0) + _file_tokens(f, tokenizer)
    return out


@dataclass(frozen=True)
class _Fold:
    start: int  # first index after the summary
    cut: int  # the verbatim tail starts here


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


def _plan(
    conversation: Conversation,
    profile: Profile,
    requested: Mode,
    draft: str | None,
    turn_start: str | None,
    tokenizer: Tokenizer | None,
    focus: str | None = None,
) -> Plan:
    tok = tokenizer if tokenizer is not None else get_tokenizer(profile.tokenizer)
    mode = effective_mode(profile, requested)
    messages = conversation.messages
    n = len(messages)
    role = profile.instructions_role

    def tokens_of(message: Message) -> int:
        return count_message(message, tok)

    history_stop = n if turn_start is None else find_backward(messages, turn_start, n)
    summary = conversation.summary if mode in SUMMARY_MODES else None
    through = summary.through if summary is not None else None

    instructions_tokens = sum(
        MESSAGE_OVERHEAD + tok.count(text)
        for text in (conversation.project_instructions, conversation.instructions)
        if text
    )
    tools_tokens = count_tools(conversation.tools, tok)
    current_summary_tokens = summary_tokens(summary, tok) if summary is not None else 0
    draft_tokens = MESSAGE_OVERHEAD + tok.count(draft) if draft else 0
    # PROJ-2: images ride with their messages (none in window mode: text only).
    # Images not attached to a message yet ride with the draft (the question they go with).
    attached = riders(conversation.files, profile, tok) if mode != "window" else {}
    draft_riders = attached.pop(DRAFT, [])
    if draft is None:
        draft_riders = []
    rider_toks = rider_tokens(attached)

    # Files sent with every request: pinned ones, and (but in ``off``) those attached to the
    # conversation rather than to a message (CTX-16).  CTX-21 counts them as must-send.
    pinned = [
        f
        for f in conversation.files
        if not f.binary
        and (f.state == "pinned" or (f.state == "auto" and f.message_id is None and mode != "off"))
    ]
    pinned_tokens = sum(_file_tokens(f, tok) for f in pinned)

    # The current turn: always sent, rendered like any pair (CTX-20 keeps calls with results).
    turn_sent: list[dict[str, Any]] = []
    turn_statuses: list[MessageStatus] = []
    turn_tokens = 0
    # The draft's and the turn's images (PROJ-2): always sent with them.
    turn_riders = sum(r.tokens for r in draft_riders)
    reserve = profile.answer_reserve
    window = profile.context_window
    budget = window - reserve
    oversized: tuple[OversizedResult, ...] = ()
    if history_stop < n and mode != "window":
        turn_sent, turn_statuses = render_pair(messages, history_stop, n, riders=attached)
        turn_tokens = sum(
            m.tokens if m.tokens is not None else tokens_of(m) for m in messages[history_stop:n]
        )
        if rider_toks:
            turn_riders += sum(rider_toks.get(m.id, 0) for m in messages[history_stop:n])
        fixed = instructions_tokens + tools_tokens + draft_tokens + pinned_tokens + turn_riders
        most = max(new_summary_tokens(profile), current_summary_tokens)
        if turn_tokens > budget - fixed - (most if mode in SUMMARY_MODES else 0):
            # CTX-13: a tool result the window cannot take even with the rest folded away is
            # left out with its call, and the turn is refused naming it.
            floor_tokens = _summary_floor(
                conversation, profile, mode, history_stop, current_summary_tokens, tokens_of
            )
            room = budget - fixed - floor_tokens
            cut = (
                _oversized_results(
                    messages,
                    history_stop,
                    room=room,
                    turn_tokens=turn_tokens,
                    tokens_of=tokens_of,
                    needed=fixed + floor_tokens + turn_tokens + reserve,
                    riders=attached,
                )
                if turn_tokens > room
                else None
            )
            if cut is not None:
                # Not sent, but counted: the refusal says what the turn would need (CTX-19).
                oversized, turn_sent, turn_statuses, _left = cut
    # CTX-21: what every request of this turn carries, whatever the memory holds.
    must = (
        instructions_tokens
        + tools_tokens
        + draft_tokens
        + pinned_tokens
        + turn_tokens
        + turn_riders
    )
    window_sent_tail: list[dict[str, Any]] = []
    auto_file_tokens = _auto_file_tokens(conversation.files, tok)
    for mid, extra in rider_toks.items():
        auto_file_tokens[mid] = auto_file_tokens.get(mid, 0) + extra
    fold: _Fold | None = None
    summary_tok = current_summary_tokens

    if mode == "off":
        chosen = Selection(lo=history_stop)
    elif mode == "window":
        chosen, window_sent_tail, turn_statuses, turn_tokens, draft_tokens = assemble_window(
            messages, history_stop, draft, profile, tok, tokens_of
        )
    else:
        # CTX-21: what must be sent whatever the memory holds.
        base = must
        chosen = select_pairs(
            messages,
            history_stop,
            through=through,
            available=budget - base - current_summary_tokens,
            tokens_of=tokens_of,
            file_tokens=auto_file_tokens,
            riders=attached,
        )
        floor = _fold_floor(
            mode,
            chosen,
            profile,
            messages,
            history_stop,
            through,
            tokens_of,
            request_tokens=base + current_summary_tokens + chosen.tokens + reserve,
        )
        if floor is not None and not oversized:
            folded = _after_fold(
                conversation,
                profile,
                mode,
                chosen,
                floor,
                budget=budget - base,
                history_stop=history_stop,
                current_summary_tokens=current_summary_tokens,
                tokens_of=tokens_of,
                auto_file_tokens=auto_file_tokens,
                riders=attached,
            )
            if folded is not None:
                fold, chosen = folded
                summary_tok = new_summary_tokens(profile)

    if fold is None and chosen.overflow and mode in SUMMARY_MODES:
        # No fold can make room.  When even a summary at its cap does not fit beside what
        # must be sent, the turn is refused and the refusal counts both (CTX-19, CTX-21:
        # needed > available).  Otherwise (the current summary leaves the history no room)
        # the turn goes with the summary and no history: every earlier message is shown out
        # of memory, nothing is cut silently.
        chosen = Selection(lo=history_stop)
        if must + new_summary_tokens(profile) > budget:
            summary_tok = max(summary_tok, new_summary_tokens(profile))
    in_memory_ids = set(chosen.in_memory_ids)
    in_memory_ids.update(
        messages[history_stop + k].id for k, s in enumerate(turn_statuses) if s == "in_memory"
    )
    if draft_riders:
        attached[DRAFT] = draft_riders
    images, images_tokens, placeholder_tokens = _image_report(
        conversation.files, attached, in_memory_ids | {DRAFT}, mode
    )
    file_statuses: dict[str, FileStatus] = {}
    sent_files: list[File] = []
    for f in conversation.files:
        if f.state == "excluded":
            file_statuses[f.id] = "excluded"
        elif f.binary:  # PROV-4, PROJ-2: a placeholder in its message stands for it
            file_statuses[f.id] = images[f.id]["status"] if f.id in images else "out_of_memory"
        elif f.state == "pinned":
            file_statuses[f.id] = "pinned"
            sent_files.append(f)
        elif (f.message_id is None and mode != "off") or f.message_id in in_memory_ids:
            file_statuses[f.id] = "in_memory"
            sent_files.append(f)
        else:
            file_statuses[f.id] = "out_of_memory"
    files_tokens = sum(_file_tokens(f, tok) for f in sent_files)

    sent: list[dict[str, Any]] = []
    if conversation.project_instructions:
        sent.append({"role": role, "content": conversation.project_instructions})
    if conversation.instructions:
        sent.append({"role": role, "content": conversation.instructions})
    if fold is not None:
        pending = PENDING_SUMMARY.format(n=fold.cut - fold.start)
        sent.append({"role": role, "content": f"{SUMMARY_HEADER}\n\n{pending}"})
    elif summary is not None:
        sent.append(summary_message(summary, role))
    sent.extend(file_block(f, role) for f in sent_files)
    sent.extend(chosen.sent)
    if mode == "window":
        sent.extend(window_sent_tail)
    else:
        sent.extend(turn_sent)
        if draft_riders:
            sent.append({"role": "user", "content": with_riders(draft or "", draft_riders, "user")})
        elif draft:
            sent.append({"role": "user", "content": draft})

    messages_tokens = chosen.tokens + turn_tokens + draft_tokens + placeholder_tokens
    used = (
        instructions_tokens
        + tools_tokens
        + summary_tok
        + messages_tokens
        + files_tokens
        + images_tokens
    )
    fits = not chosen.overflow and used <= budget and not oversized
    breakdown = Breakdown(
        instructions=instructions_tokens,
        tools=tools_tokens,
        summary=summary_tok,
        messages=messages_tokens,
        files=files_tokens,
        images=images_tokens,
        reserve=reserve,
        free=max(0, window - used - reserve),
        used=used,
        window=window,
    )

    request = None
    if fold is not None:
        request = _fold_request(
            messages,
            fold,
            profile,
            tok,
            running_tokens=current_summary_tokens,
            focus=focus,
            tokens_of=tokens_of,
        )
    prices = price_for(profile)
    price = PriceEstimate(
        next_request=0.0 if prices.free else cost(used, prices.input_per_mtok),
        compaction=request.estimated_cost if request is not None else 0.0,
        free=prices.free,
    )
    status = StatusMap(
        messages,
        chosen.lo,
        [*chosen.explicit, *turn_statuses],
        summary_through=through,
        boundary=chosen.boundary,
        summarized_below=fold.cut if fold is not None else None,
    )
    return Plan(
        mode=mode,
        fits=fits,
        messages=tuple(sent),
        status=status,
        files=file_statuses,
        tokens=breakdown,
        level=level_for(used, window) if fits else "red",
        compaction=CompactionDecision(
            needed=request is not None, threshold=full_threshold(profile), request=request
        ),
        price=price,
        oversized=oversized,
        images=images,
    )


def _image_report(
    files: Sequence[File],
    attached: Mapping[str, Sequence[Rider]],
    in_memory: set[str],
    mode: Mode,
) -> tuple[dict[str, dict[str, Any]], int, int]:
    """PROJ-2: each image's entry in the plan (status, tokens, why it is not sent), the
    tokens of the images sent, and those of the placeholders sent in their stead."""
    report: dict[str, dict[str, Any]] = {}
    images = placeholders = 0
    for rider in (r for group in attached.values() for r in group):
        sent = (rider.file.message_id or DRAFT) in in_memory
        if sent and rider.part is not None:
            images += rider.tokens
            report[rider.file.id] = {"status": "in_memory", "tokens": rider.tokens}
            continue
        if sent:
            placeholders += rider.tokens
        report[rider.file.id] = {
            "status": "out_of_memory",
            "tokens": 0,
            "reason": NOT_ACCEPTED if rider.part is None else MESSAGE_NOT_SENT,
        }
    for f in files:
        if f.image and f.id not in report:
            reason = (
                EXCLUDED
                if f.state == "excluded"
                else NOT_ATTACHED
                if f.message_id is None
                else WINDOW_MODE
                if mode == "window"
                else MESSAGE_NOT_SENT
            )
            status = "excluded" if f.state == "excluded" else "out_of_memory"
            report[f.id] = {"status": status, "tokens": 0, "reason": reason}
    return report, images, placeholders


def _summary_floor(
    conversation: Conversation,
    profile: Profile,
    mode: Mode,
    history_stop: int,
    current_summary_tokens: int,
    tokens_of: TokensOf,
) -> int:
    """The least the memory before the turn can take once folded as far as it goes: nothing
    outside the summary modes; else the summary with the history after it that is not
    excluded, or a new summary at its cap when that is smaller (a lower bound: CTX-13 must
    not leave out a tool result that a fold would have made room for).  The walk stops at
    the cap."""
    if mode not in SUMMARY_MODES:
        return 0
    cap = new_summary_tokens(profile)
    summary = conversation.summary
    through = summary.through if summary is not None else None
    history = 0
    for pair in PairWalker(conversation.messages, history_stop, through, tokens_of):
        if not pair.excluded:
            history += pair.tokens
            if current_summary_tokens + history >= cap:
                return cap
    return current_summary_tokens + history


def _oversized_results(
    messages: Sequence[Message],
    history_stop: int,
    *,
    room: int,
    turn_tokens: int,
    tokens_of: TokensOf,
    needed: int,
    riders: Mapping[str, Sequence[Rider]] | None = None,
) -> tuple[tuple[OversizedResult, ...], list[dict[str, Any]], list[MessageStatus], int] | None:
    """The turn with its largest tool results left out (each with its call, CTX-20) until it
    fits ``room``: the results, the turn as sent, its statuses and tokens; None when leaving
    results out would not make it fit (then the turn is refused as a whole, CTX-19)."""
    n = len(messages)
    names: dict[str, str] = {}
    for k in range(history_stop, n):
        for call in messages[k].tool_calls:
            names[call.id] = call.name

    def cost(m: Message) -> int:
        return m.tokens if m.tokens is not None else tokens_of(m)

    candidates = sorted(
        (
            (cost(messages[k]), k)
            for k in range(history_stop, n)
            if messages[k].role == "tool" and messages[k].tool_call_id in names
        ),
        key=lambda item: (-item[0], item[1]),
    )
    _, before = render_pair(messages, history_stop, n)
    drop: set[str] = set()
    for _tokens, k in candidates:
        drop.add(str(messages[k].tool_call_id))
        sent, statuses = render_pair(messages, history_stop, n, drop=frozenset(drop), riders=riders)
        left_out = sum(
            cost(messages[history_stop + i])
            for i, (was, now) in enumerate(zip(before, statuses, strict=True))
            if was == "in_memory" and now != "in_memory"
        )
        if turn_tokens - left_out <= room:
            results = tuple(
                OversizedResult(
                    message_id=m.id,
                    tool_call_id=str(m.tool_call_id),
                    tool=names[str(m.tool_call_id)],
                    tokens=cost(m),
                    needed=needed,
                )
                for _t, j in candidates
                if (m := messages[j]).tool_call_id in drop
            )
            return results, sent, statuses, turn_tokens - left_out
    return None


def _fold_floor(
    mode: Mode,
    chosen: Selection,
    profile: Profile,
    messages: Sequence[Message],
    history_stop: int,
    through: str | None,
    tokens_of: TokensOf,
    *,
    request_tokens: int,
) -> int | None:
    """Where the mode's policy wants the verbatim tail to start, when it wants a fold.
    ``request_tokens``: the request as things stand (with the answer reserve)."""
    if mode == "economy":
        return economy_floor(chosen, profile, messages, history_stop, through, tokens_of)
    if not chosen.overflow and request_tokens <= full_threshold(profile):
        return None  # CTX-5: below the threshold the whole history is sent
    return full_floor(chosen, profile, messages, history_stop, through, tokens_of)


def _after_fold(
    conversation: Conversation,
    profile: Profile,
    mode: Mode,
    before: Selection,
    floor: int,
    *,
    budget: int,
    history_stop: int,
    current_summary_tokens: int,
    tokens_of: TokensOf,
    auto_file_tokens: Mapping[str, int],
    riders: Mapping[str, Sequence[Rider]] | None = None,
) -> tuple[_Fold, Selection] | None:
    """The fold and the verbatim tail after it, or None when no fold is wanted or possible.

    ``budget`` is what the window leaves for the summary and the history.  The tail keeps,
    newest first, the pairs above ``floor`` that fit beside a new summary at its cap."""
    messages = conversation.messages
    through = conversation.summary.through if conversation.summary is not None else None
    new_summary = new_summary_tokens(profile)
    if new_summary > budget:
        return None  # the turn does not fit even beside a summary alone: refused (CTX-19)
    after = select_pairs(
        messages,
        history_stop,
        through=through,
        available=budget - new_summary,
        tokens_of=tokens_of,
        file_tokens=auto_file_tokens,
        floor=floor,
        riders=riders,
    )
    if not (after.overflow or after.floored):
        return None  # the whole history after the summary stays: nothing to fold
    start = _after_summary(before, conversation, messages)
    cut = trim_excluded(messages, start, after.lo)
    if cut <= start:
        return None
    if not before.overflow and mode == "full":
        # CTX-5: a fold the request does not need must noticeably unload it.
        used_before = profile.context_window - profile.answer_reserve - budget
        used_before += current_summary_tokens + before.tokens
        saved = before.tokens - after.tokens + current_summary_tokens - new_summary
        if saved < MIN_UNLOAD_FRACTION * used_before:
            return None
    # The tail as sent is whole: nothing in it overflows once the fold is made.
    after.overflow = False
    after.overflow_pair = None
    return _Fold(start, cut), after


def _fold_request(
    messages: Sequence[Message],
    fold: _Fold,
    profile: Profile,
    tok: Tokenizer,
    *,
    running_tokens: int,
    focus: str | None,
    tokens_of: TokensOf,
) -> CompactionRequest:
    fold_tokens = tokens_between(messages, fold.start, fold.cut, tokens_of)
    rounds, input_tokens, estimated = estimate_fold(
        profile, tok, fold_tokens=fold_tokens, running_tokens=running_tokens, focus=focus
    )
    return CompactionRequest(
        first_id=messages[fold.start].id,
        through=messages[fold.cut - 1].id,
        message_count=fold.cut - fold.start,
        covered=fold.cut,
        rounds=rounds,
        input_tokens=input_tokens,
        max_output_tokens=summary_cap(profile),
        estimated_cost=estimated,
    )


def trim_excluded(messages: Sequence[Message], start: int, cut: int) -> int:
    """``cut`` moved down past the excluded pairs just below it: a fold ends with a pair it
    summarises (excluded pairs stay after the summary, unsent, CTX-15)."""
    while cut > start:
        first = cut - 1
        while first > start and messages[first].role != "user":
            first -= 1
        if not any(messages[k].excluded for k in range(first, cut)):
            break
        cut = first
    return cut


def _after_summary(
    chosen: Selection, conversation: Conversation, messages: Sequence[Message]
) -> int:
    """First index after the summary (0 without one), scanning back only if the walk stopped
    before reaching it."""
    if chosen.boundary is not None:
        return chosen.boundary + 1
    summary = conversation.summary
    if summary is None or summary.through is None:
        return 0
    return find_backward(messages, summary.through, chosen.lo) + 1


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
    return _fold_request(
        messages,
        _Fold(start, cut),
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
