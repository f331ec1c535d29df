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
6. Compaction (CTX-4, CTX-5, CTX-10): in ``economy`` and ``full`` the mode's rule may ask for
   a summary of a prefix; the plan then carries a :class:`CompactionRequest` and its price.
   The plan's messages are what would be sent *without* compacting: the caller compacts, then
   plans again.
7. ``fits`` is false when the request (or the history the mode wants) exceeds the window
   minus the reserve; :meth:`Plan.require_fit` raises ``DoesNotFit`` (CTX-19).  Nothing is
   ever dropped silently: what did not fit is ``out_of_memory``.

Statuses (CTX-14) are a :class:`~chatmem.context.status.StatusMap`: explicit for the walked
tail, ranges for the rest, expanded on demand.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from chatmem.context.compaction import (
    SUMMARY_OUTPUT_TOKENS,
    CompactionRequest,
    build_request,
    summary_message,
    summary_tokens,
)
from chatmem.context.errors import DoesNotFit
from chatmem.context.history import PairWalker, find_backward
from chatmem.context.modes import (
    MIN_UNLOAD_FRACTION,
    SUMMARY_MODES,
    Selection,
    economy_cut,
    effective_mode,
    full_cut,
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


@dataclass(frozen=True)
class Plan:
    """What the next request sends and why.  ``messages`` are OpenAI chat messages."""

    mode: Mode
    fits: bool
    #: ``fits``, or the planned compaction is estimated to make it fit (CTX-19: a request is
    #: refused only when it does not fit *even after* compaction).
    sendable: bool
    messages: tuple[dict[str, Any], ...]
    status: Mapping[str, MessageStatus]
    files: Mapping[str, FileStatus]
    tokens: Breakdown
    level: Level
    compaction: CompactionDecision
    price: PriceEstimate = field(default_factory=lambda: PriceEstimate(0.0))

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
            "compaction": {
                "needed": self.compaction.needed,
                "threshold": self.compaction.threshold,
            },
            "price": {
                "next_request": self.price.next_request,
                "compaction": self.price.compaction,
                "currency": self.price.currency,
                "free": self.price.free,
            },
        }

    def require_fit(self) -> None:
        """Raise ``DoesNotFit`` (CTX-19) unless the request fits the window as planned."""
        if not self.fits:
            raise DoesNotFit(
                needed=self.tokens.used + self.tokens.reserve, available=self.tokens.window
            )

    def require_sendable(self) -> None:
        """Raise ``DoesNotFit`` (CTX-19) unless the request fits now or after the planned
        compaction.  Admission checks this; after compacting, check :meth:`require_fit`."""
        if not self.sendable:
            raise DoesNotFit(
                needed=self.tokens.used + self.tokens.reserve, available=self.tokens.window
            )


def file_block(file: File) -> dict[str, str]:
    """How a file is sent: a system message with its name (CTX-16)."""
    return {"role": "system", "content": f"File {file.name}:\n\n{file.content}"}


def _file_tokens(file: File, tokenizer: Tokenizer) -> int:
    if file.tokens is not None:
        return file.tokens
    return MESSAGE_OVERHEAD + tokenizer.count(file_block(file)["content"])


def _auto_file_tokens(files: Sequence[File], tokenizer: Tokenizer) -> dict[str, int]:
    """Message id -> tokens of the auto files attached to it (they travel with it)."""
    out: dict[str, int] = {}
    for f in files:
        if f.state == "auto" and f.message_id is not None:
            out[f.message_id] = out.get(f.message_id, 0) + _file_tokens(f, tokenizer)
    return out


@dataclass
class _Fold:
    start: int
    stop: int


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

    def tokens_of(message: Message) -> int:
        return count_message(message, tok)

    history_stop = n if turn_start is None else find_backward(messages, turn_start, n)
    summary = conversation.summary if mode in SUMMARY_MODES else None

    instructions_tokens = (
        MESSAGE_OVERHEAD + tok.count(conversation.instructions) if conversation.instructions else 0
    )
    tools_tokens = count_tools(conversation.tools, tok)
    summary_tok = summary_tokens(summary, tok) if summary is not None else 0
    draft_tokens = MESSAGE_OVERHEAD + tok.count(draft) if draft else 0

    pinned = [f for f in conversation.files if f.state == "pinned"]
    pinned_tokens = sum(_file_tokens(f, tok) for f in pinned)

    # The current turn: always sent, rendered like any pair (CTX-20 keeps calls with results).
    turn_sent: list[dict[str, Any]] = []
    turn_statuses: list[MessageStatus] = []
    turn_tokens = 0
    if history_stop < n and mode != "window":
        turn_sent, turn_statuses = render_pair(messages, history_stop, n)
        turn_tokens = sum(
            m.tokens if m.tokens is not None else tokens_of(m) for m in messages[history_stop:n]
        )

    reserve = profile.answer_reserve
    window = profile.context_window
    budget = window - reserve
    fixed = instructions_tokens + tools_tokens + summary_tok + draft_tokens + pinned_tokens
    window_sent_tail: list[dict[str, Any]] = []
    auto_file_tokens = _auto_file_tokens(conversation.files, tok)

    if mode == "off":
        chosen = Selection(lo=history_stop)
    elif mode == "window":
        chosen, window_sent_tail, turn_statuses, turn_tokens, draft_tokens = assemble_window(
            messages, history_stop, draft, profile, tok, tokens_of
        )
    else:
        chosen = select_pairs(
            messages,
            history_stop,
            through=summary.through if summary is not None else None,
            available=budget - fixed - turn_tokens,
            tokens_of=tokens_of,
            file_tokens=auto_file_tokens,
        )

    in_memory_ids = set(chosen.in_memory_ids)
    in_memory_ids.update(
        messages[history_stop + k].id for k, s in enumerate(turn_statuses) if s == "in_memory"
    )
    file_statuses: dict[str, FileStatus] = {}
    sent_files: list[File] = []
    for f in conversation.files:
        if f.state == "pinned":
            file_statuses[f.id] = "pinned"
            sent_files.append(f)
        elif f.state == "excluded":
            file_statuses[f.id] = "excluded"
        elif (f.message_id is None and mode != "off") or f.message_id in in_memory_ids:
            file_statuses[f.id] = "in_memory"
            sent_files.append(f)
        else:
            file_statuses[f.id] = "out_of_memory"
    files_tokens = sum(_file_tokens(f, tok) for f in sent_files)

    sent: list[dict[str, Any]] = []
    if conversation.instructions:
        sent.append({"role": "system", "content": conversation.instructions})
    if summary is not None:
        sent.append(summary_message(summary))
    sent.extend(file_block(f) for f in sent_files)
    sent.extend(chosen.sent)
    if mode == "window":
        sent.extend(window_sent_tail)
    else:
        sent.extend(turn_sent)
        if draft:
            sent.append({"role": "user", "content": draft})

    messages_tokens = chosen.tokens + turn_tokens + draft_tokens
    used = instructions_tokens + tools_tokens + summary_tok + messages_tokens + files_tokens
    fits = not chosen.overflow and used <= budget
    breakdown = Breakdown(
        instructions=instructions_tokens,
        tools=tools_tokens,
        summary=summary_tok,
        messages=messages_tokens,
        files=files_tokens,
        images=0,
        reserve=reserve,
        free=max(0, window - used - reserve),
        used=used,
        window=window,
    )

    fold = _fold(mode, chosen, profile, history_stop, used, summary_tok, conversation, messages)
    threshold = full_threshold(profile)
    request = None
    if fold is not None:
        request = build_request(
            messages,
            fold.start,
            fold.stop,
            summary=conversation.summary,
            profile=profile,
            tokenizer=tok,
            focus=focus,
        )
    sendable = fits
    if not fits and fold is not None:
        # After compaction: the new summary (at most its output cap) replaces the fold; what
        # stays verbatim is the tail after it, counted from cached counts (O(kept tail)).
        kept = sum(
            (m.tokens if m.tokens is not None else tokens_of(m)) + auto_file_tokens.get(m.id, 0)
            for m in messages[fold.stop : history_stop]
        )
        sendable = fixed - summary_tok + SUMMARY_OUTPUT_TOKENS + kept + turn_tokens <= budget
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
        summary_through=summary.through if summary is not None else None,
        boundary=chosen.boundary,
    )
    return Plan(
        mode=mode,
        fits=fits,
        sendable=sendable,
        messages=tuple(sent),
        status=status,
        files=file_statuses,
        tokens=breakdown,
        level=level_for(used, window),
        compaction=CompactionDecision(
            needed=request is not None, threshold=threshold, request=request
        ),
        price=price,
    )


def _fold(
    mode: Mode,
    chosen: Selection,
    profile: Profile,
    history_stop: int,
    used: int,
    summary_tok: int,
    conversation: Conversation,
    messages: Sequence[Message],
) -> _Fold | None:
    """The range to summarise now (CTX-4, CTX-5), or None."""
    if mode == "economy":
        cut = economy_cut(chosen, profile)
    elif mode == "full":
        over_threshold = used + profile.answer_reserve > full_threshold(profile)
        if not (chosen.overflow or over_threshold):
            return None
        cut = full_cut(chosen, profile, history_stop)
        if cut is not None and not chosen.overflow:
            # the saving is what leaves the request, less the longer summary that replaces it
            folded = sum(p.tokens for p in chosen.pairs if p.start < cut)
            saved = folded + summary_tok - SUMMARY_OUTPUT_TOKENS
            if saved < MIN_UNLOAD_FRACTION * used:
                return None  # folding would not noticeably unload the request
    else:
        return None
    if cut is None:
        return None
    start = _after_summary(chosen, conversation, messages)
    if cut <= start:
        return None
    return _Fold(start, cut)


def _after_summary(
    chosen: Selection, conversation: Conversation, messages: Sequence[Message]
) -> int:
    """First index after the summary (0 without one), scanning back only if the walk stopped
    before reaching it."""
    if chosen.boundary is not None:
        return chosen.boundary + 1
    if conversation.summary is None:
        return 0
    return find_backward(messages, conversation.summary.through, chosen.lo) + 1


def compaction_request(
    conversation: Conversation,
    profile: Profile,
    *,
    mode: Mode,
    focus: str | None = None,
    manual: bool = False,
    tokenizer: Tokenizer | None = None,
) -> CompactionRequest | None:
    """What to summarise now.

    Automatic (``manual=False``): what CTX-4/CTX-5 would fold before the next request, or
    None.  Manual (CTX-11, "Compress now"): everything after the summary except the last
    complete pair; None ("Nothing to compress yet") with fewer than two complete pairs after
    the last summary.  ``focus`` is passed to the summariser either way."""
    tok = tokenizer if tokenizer is not None else get_tokenizer(profile.tokenizer)
    if not manual:
        return _plan(conversation, profile, mode, None, None, tok, focus).compaction.request
    messages = conversation.messages
    summary = conversation.summary
    walker = PairWalker(
        messages,
        len(messages),
        summary.through if summary is not None else None,
        lambda m: count_message(m, tok),
    )
    pairs = list(walker)
    cut = manual_cut(pairs)
    if cut is None:
        return None
    start = (walker.boundary if walker.boundary is not None else -1) + 1
    return build_request(
        messages, start, cut, summary=summary, profile=profile, tokenizer=tok, focus=focus
    )
