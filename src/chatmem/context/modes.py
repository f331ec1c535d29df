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
    :func:`full_threshold` — min(:data:`FULL_THRESHOLD_FRACTION` x window,
    :data:`FULL_THRESHOLD_CAP`) — everything but the last ``Profile.full_keep_last``
    messages (cut at a pair boundary, never inside the last complete pair) is folded, but only
    when that saves at least :data:`MIN_UNLOAD_FRACTION` of the request, counting the new
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

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from chatmem.context.errors import PlanInputError
from chatmem.context.history import Pair, PairWalker, TokensOf
from chatmem.context.tokens import tool_calls_json
from chatmem.context.values import MODES, Message, MessageStatus, Mode, Profile

FULL_THRESHOLD_FRACTION = 0.8
FULL_THRESHOLD_CAP = 200_000
# "Noticeably unloads": folding must remove at least this share of the request's tokens.
MIN_UNLOAD_FRACTION = 0.2


# Modes that send the summary, and so give messages it covers the status ``summarized``.
SUMMARY_MODES: frozenset[Mode] = frozenset({"economy", "full"})


def effective_mode(profile: Profile, mode: Mode) -> Mode:
    """The mode actually used: a stateless model always gets ``off`` (CTX-7)."""
    if mode not in MODES:
        raise PlanInputError(f"unknown memory mode {mode!r}; choose one of {', '.join(MODES)}")
    return "off" if profile.stateless else mode


def full_threshold(profile: Profile) -> int:
    """CTX-5: the auto-compaction threshold in tokens (request + answer reserve)."""
    return min(int(FULL_THRESHOLD_FRACTION * profile.context_window), FULL_THRESHOLD_CAP)


# --------------------------------------------------------------------------- rendering


def api_message(message: Message, calls: Sequence[Any] | None = None) -> dict[str, Any]:
    """A stored message in the OpenAI chat shape."""
    out: dict[str, Any] = {"role": message.role, "content": message.content}
    if message.role == "tool":
        out["tool_call_id"] = message.tool_call_id
    elif calls:
        out["tool_calls"] = calls
    return out


def render_pair(
    messages: Sequence[Message], start: int, stop: int
) -> tuple[list[dict[str, Any]], list[MessageStatus]]:
    """The messages of one pair as sent, and their statuses, keeping calls with results."""
    pair = messages[start:stop]
    plain = True
    for m in pair:
        if m.tool_calls or m.role == "tool":
            plain = False
            break
    if plain:
        return (
            [{"role": m.role, "content": m.content} for m in pair],
            ["in_memory"] * len(pair),
        )
    answered = {m.tool_call_id for m in pair if m.role == "tool"}
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
            sent.append({"role": m.role, "content": m.content})
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
    in_memory_ids: set[str] = field(default_factory=set)


def select_pairs(
    messages: Sequence[Message],
    stop: int,
    *,
    through: str | None,
    available: int,
    tokens_of: TokensOf,
    file_tokens: Mapping[str, int] | None = None,
) -> Selection:
    """``economy``/``full``: every pair after the summary, newest first, while it fits.

    ``file_tokens`` maps a message id to the tokens of the auto files riding with it
    (CTX-16): a pair is taken only if it fits together with its files."""
    walker = PairWalker(messages, stop, through, tokens_of)
    chosen = Selection(lo=stop)
    sent_chunks: list[list[dict[str, Any]]] = []
    status_chunks: list[list[MessageStatus]] = []
    spent = 0
    for pair in walker:
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
        sent, statuses = render_pair(messages, pair.start, pair.stop)
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


def _oldest_kept(chosen: Selection) -> int | None:
    """On overflow: keep what fitted and fold everything older (CTX-5 "would not fit")."""
    if chosen.pairs:
        return chosen.pairs[-1].start
    return chosen.overflow_pair.start if chosen.overflow_pair is not None else None


def economy_cut(chosen: Selection, profile: Profile) -> int | None:
    """CTX-4: fold up to this index (exclusive), or None.  Keeps the newest K complete pairs
    verbatim (at least one) and folds only whole batches of B complete pairs, unless the
    request overflows the window, in which case everything older than the K pairs goes."""
    complete = [p for p in chosen.pairs if p.complete]  # newest first
    keep = max(1, profile.economy_pairs)
    if chosen.overflow:
        return complete[keep - 1].start if len(complete) >= keep else _oldest_kept(chosen)
    pending = len(complete) - keep
    batch = max(1, profile.economy_batch)
    if pending < batch:
        return None
    fold_count = (pending // batch) * batch
    return complete[len(complete) - fold_count].stop


def full_cut(chosen: Selection, profile: Profile, history_stop: int) -> int | None:
    """CTX-5: where the kept tail starts: the newest pair start that keeps at least
    ``full_keep_last`` messages, and never inside the last complete pair."""
    limit = history_stop - profile.full_keep_last
    cut = next((p.start for p in chosen.pairs if p.start <= limit), None)
    if cut is None:
        if not chosen.overflow:
            return None  # fewer than full_keep_last messages after the summary
        cut = _oldest_kept(chosen)
        if cut is None:
            return None
    seen = [*chosen.pairs, chosen.overflow_pair] if chosen.overflow_pair else chosen.pairs
    last_complete = next((p.start for p in seen if p.complete), None)
    if last_complete is not None:
        cut = min(cut, last_complete)
    return cut


def manual_cut(pairs: Sequence[Pair]) -> int | None:
    """CTX-11: keep the last complete pair; refuse (None) with fewer than two complete pairs."""
    complete = [p for p in pairs if p.complete and not p.excluded]
    if len(complete) < 2:
        return None
    return complete[0].start
