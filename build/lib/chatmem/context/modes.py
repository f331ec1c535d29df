"""Memory modes: which stored messages a request carries (CTX-3..CTX-7, CTX-15, CTX-20).

Theory of operation
-------------------
History is walked from the newest message backwards (``history.PairWalker``) and each mode
stops as soon as it has what it needs, so the cost of a plan follows the window, not the
history.  The current turn (``turn_start`` onwards: the question being answered and its tool
calls and results so far, TURN-5/CTX-13) and the draft are not history: they are always sent.

``off`` (CTX-3)
    No history.  Every earlier message is ``out_of_memory``.
``economy`` (CTX-4)
    The summary plus every pair after it.  Complete pairs beyond the newest K
    (``Profile.economy_pairs``) wait verbatim until B (``Profile.economy_batch``) of them
    have gathered; then the oldest whole batches are folded (:func:`economy_cut`).
``full`` (CTX-5)
    The summary plus every pair after it.  When the request plus the answer reserve exceeds
    :func:`~chatmem.context.policy.full_threshold` — min(``Profile.full_threshold_fraction`` x window,
    ``Profile.full_threshold_cap``) — everything but the last ``Profile.full_keep_messages``
    messages (cut at a pair boundary, never inside the last complete pair) is folded, but only
    when that saves at least :data:`~chatmem.context.policy.MIN_UNLOAD_FRACTION` of the request, counting the new
    summary's maximum length against the saving ("noticeably unloads") or when the request would not fit the window at all (:func:`full_cut`).
``window`` (CTX-6)
    No summary.  The newest messages, at most N (``Profile.window_messages``, counting the
    current one) and C characters (``Profile.window_chars``), newest to oldest.  A message
    longer than C by itself is cut to what is left of the budget with the marker
    :data:`~chatmem.context.window.TRUNCATION_MARKER` stating the exact number of characters dropped (the marker
    counts toward C), and assembly stops there; a message that merely does not fit the rest
    of the budget ends the assembly.  Roles other than ``assistant`` are sent as ``user``, so
    tool calls are written into the assistant's text and results sent as user text
    (assembly lives in ``window.py``).
stateless profiles (CTX-7)
    Always ``off`` (:func:`effective_mode`).

In every mode excluded pairs are skipped (CTX-15), and a tool call is sent only together with
its result (CTX-20): a call whose result is missing is dropped (its text is kept), a result
whose call is missing is not sent.  Pair modes stop walking when the token budget is spent:
the plan then does not fit, and nothing is cut silently (CTX-19).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from chatmem.context.errors import PlanInputError
from chatmem.context.history import Pair, PairWalker, TokensOf
from chatmem.context.images import Rider, with_riders
from chatmem.context.policy import MANUAL_MIN_COMPLETE_PAIRS, economy_fold_count
from chatmem.context.tokens import tool_calls_json
from chatmem.context.values import MODES, Message, MessageStatus, Mode, Profile

# Modes that send the summary, and so give messages it covers the status ``summarized``.
SUMMARY_MODES: frozenset[Mode] = frozenset({"economy", "full"})


def effective_mode(profile: Profile, mode: Mode) -> Mode:
    """The mode actually used: a stateless model always gets ``off`` (CTX-7)."""
    if mode not in MODES:
        raise PlanInputError(f"unknown memory mode {mode!r}; choose one of {', '.join(MODES)}")
    return "off" if profile.stateless else mode


# --------------------------------------------------------------------------- rendering


def api_message(message: Message, calls: Sequence[Any] | None = None) -> dict[str, Any]:
    """A stored message in the OpenAI chat shape."""
    out: dict[str, Any] = {"role": message.role, "content": message.content}
    if message.role == "tool":
        out["tool_call_id"] = message.tool_call_id
    elif calls:
        out["tool_calls"] = calls
    return out


def _content(message: Message, riders: Mapping[str, Sequence[Rider]] | None) -> Any:
    """The message's content as sent: with its images when any ride with it (PROJ-2)."""
    attached = riders.get(message.id) if riders else None
    return with_riders(message.content, attached, message.role) if attached else message.content


def render_pair(
    messages: Sequence[Message],
    start: int,
    stop: int,
    *,
    drop: frozenset[str] = frozenset(),
    riders: Mapping[str, Sequence[Rider]] | None = None,
) -> tuple[list[dict[str, Any]], list[MessageStatus]]:
    """The messages of one pair as sent, and their statuses, keeping calls with results.
    ``drop``: tool call ids left out with their results (CTX-13, CTX-20).  ``riders``: the
    images riding with messages (PROJ-2)."""
    pair = messages[start:stop]
    plain = True
    for m in pair:
        if m.tool_calls or m.role == "tool":
            plain = False
            break
    if plain:
        return (
            [{"role": m.role, "content": _content(m, riders)} for m in pair],
            ["in_memory"] * len(pair),
        )
    answered = {m.tool_call_id for m in pair if m.role == "tool"} - drop
    called: set[str] = set()
    sent: list[dict[str, Any]] = []
    statuses: list[MessageStatus] = []
    for m in pair:
        if m.role == "tool":
            if m.tool_call_id in called:
                sent.append(api_message(m))
                statuses.append("in_memory")
            else:
                statuses.append("out_of_memory")
        elif m.tool_calls:
            kept = [c for c in m.tool_calls if c.id in answered]
            called.update(c.id for c in kept)
            if kept or m.content:
                sent.append(api_message(m, tool_calls_json(m, kept) if kept else None))
                statuses.append("in_memory")
            else:
                statuses.append("out_of_memory")
        else:
            sent.append({"role": m.role, "content": _content(m, riders)})
            statuses.append("in_memory")
    return sent, statuses


# --------------------------------------------------------------------------- selection


@dataclass
class Selection:
    """What a mode chose from history (the turn and the draft are added by the planner)."""

    sent: list[dict[str, Any]] = field(default_factory=list)  # oldest first
    tokens: int = 0  # of ``sent`` (cached counts)
    lo: int = 0  # statuses from here to the history's end are in ``explicit``
    explicit: list[MessageStatus] = field(default_factory=list)
    overflow: bool = False  # the mode wanted more history than the budget holds
    boundary: int | None = None  # summary boundary index, when the walk found it
    pairs: list[Pair] = field(default_factory=list)  # included pairs, newest first
    overflow_pair: Pair | None = None  # the first pair that did not fit
    floored: bool = False  # the walk stopped at the ``floor`` (the rest is to be folded)
    in_memory_ids: set[str] = field(default_factory=set)


def select_pairs(
    messages: Sequence[Message],
    stop: int,
    *,
    through: str | None,
    available: int,
    tokens_of: TokensOf,
    file_tokens: Mapping[str, int] | None = None,
    floor: int | None = None,
    riders: Mapping[str, Sequence[Rider]] | None = None,
) -> Selection:
    """``economy``/``full``: every pair after the summary, newest first, while it fits.

    ``file_tokens`` maps a message id to the tokens of the auto files riding with it
    (CTX-16) and its images (PROJ-2): a pair is taken only if it fits together with them.
    ``floor``: pairs starting before it are not taken (they are to be folded, CTX-21).
    ``riders``: the images, sent with their messages."""
    walker = PairWalker(messages, stop, through, tokens_of)
    chosen = Selection(lo=stop)
    sent_chunks: list[list[dict[str, Any]]] = []
    status_chunks: list[list[MessageStatus]] = []
    spent = 0
    for pair in walker:
        if floor is not None and pair.start < floor:
            chosen.floored = True
            break
        if pair.excluded:
            status_chunks.append(["excluded"] * (pair.stop - pair.start))
            chosen.lo = pair.start
            continue
        cost = pair.tokens
        if file_tokens:
            cost += sum(file_tokens.get(messages[k].id, 0) for k in range(pair.start, pair.stop))
        if spent + cost > available:
            chosen.overflow = True
            chosen.overflow_pair = pair
            break
        spent += cost
        sent, statuses = render_pair(messages, pair.start, pair.stop, riders=riders)
        sent_chunks.append(sent)
        status_chunks.append(statuses)
        chosen.pairs.append(pair)
        chosen.tokens += pair.tokens
        chosen.lo = pair.start
        for k, status in enumerate(statuses):
            if status == "in_memory":
                chosen.in_memory_ids.add(messages[pair.start + k].id)
    chosen.boundary = walker.boundary
    chosen.sent = [m for chunk in reversed(sent_chunks) for m in chunk]
    chosen.explicit = [s for chunk in reversed(status_chunks) for s in chunk]
    return chosen


def tokens_of_cached(message: Message, tokens_of: TokensOf) -> int:
    return message.tokens if message.tokens is not None else tokens_of(message)


# --------------------------------------------------------------------------- folding
#
# A fold's *floor* is where the mode's policy wants the verbatim tail to start (CTX-4: the
# last K pairs; CTX-5: the last N messages).  The planner then keeps, newest first, what fits
# the window after the fold above that floor: the policy shrinks, down to the current turn
# alone, when its tail would not fit (CTX-21).


def _floor(
    messages: Sequence[Message],
    stop: int,
    through: str | None,
    tokens_of: TokensOf,
    enough: Callable[[Pair], bool],
) -> int:
    """Start of the newest pair at which ``enough`` (called on each pair, newest first) is
    first true; the oldest pair's start when it never is."""
    floor = stop
    for pair in PairWalker(messages, stop, through, tokens_of):
        floor = pair.start
        if enough(pair):
            break
    return floor


def _complete_floor(
    messages: Sequence[Message], stop: int, through: str | None, tokens_of: TokensOf, keep: int
) -> int:
    """Start of the ``keep``-th newest complete pair (``stop`` when ``keep`` is 0)."""
    if keep <= 0:
        return stop
    seen = 0

    def enough(pair: Pair) -> bool:
        nonlocal seen
        seen += pair.complete and not pair.excluded
        return seen == keep

    return _floor(messages, stop, through, tokens_of, enough)


def _message_floor(
    messages: Sequence[Message], stop: int, through: str | None, tokens_of: TokensOf, keep: int
) -> int:
    """Start of the newest pair that keeps at least ``keep`` messages verbatim."""
    if keep <= 0:
        return stop
    return _floor(messages, stop, through, tokens_of, lambda pair: stop - pair.start >= keep)


def economy_floor(
    chosen: Selection,
    profile: Profile,
    messages: Sequence[Message],
    stop: int,
    through: str | None,
    tokens_of: TokensOf,
) -> int | None:
    """CTX-4: the newest K complete pairs stay; older complete pairs are folded in whole
    batches of B.  When the request overflows everything older than the K pairs goes."""
    if chosen.overflow:
        keep = max(0, profile.economy_pairs)
        return _complete_floor(messages, stop, through, tokens_of, keep)
    complete = [p for p in chosen.pairs if p.complete]  # newest first
    fold_count = economy_fold_count(profile, len(complete))
    if not fold_count:
        return None
    return complete[len(complete) - fold_count].stop


def full_floor(
    chosen: Selection,
    profile: Profile,
    messages: Sequence[Message],
    stop: int,
    through: str | None,
    tokens_of: TokensOf,
) -> int | None:
    """CTX-5: the last N messages stay (a pair boundary; by preference never inside the last
    complete pair).  None: the walk reached the summary with fewer than N messages."""
    floor = _message_floor(messages, stop, through, tokens_of, profile.full_keep_messages)
    seen = [*chosen.pairs, chosen.overflow_pair] if chosen.overflow_pair else chosen.pairs
    last_complete = next((p.start for p in seen if p.complete and not p.excluded), None)
    if last_complete is not None:
        floor = min(floor, last_complete)
    return floor


def manual_cut(pairs: Sequence[Pair]) -> int | None:
    """CTX-11: keep the last complete pair; refuse (None) with fewer than two complete pairs."""
    complete = [p for p in pairs if p.complete and not p.excluded]
    if len(complete) < MANUAL_MIN_COMPLETE_PAIRS:
        return None
    return complete[0].start
