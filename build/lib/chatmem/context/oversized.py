"""CTX-13: a tool result of the turn in progress that the window cannot take.

Even with everything before the turn folded away (:func:`summary_floor`, a lower bound), a
turn may not fit: its largest tool results are then left out, each with its call (CTX-20),
until it does (:func:`oversized_results`), and the plan refuses naming the tool, not the
question.  Later turns see that pair as ordinary history.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from chatmem.context.compaction import new_summary_tokens
from chatmem.context.history import PairWalker, TokensOf
from chatmem.context.images import Rider
from chatmem.context.modes import SUMMARY_MODES, render_pair
from chatmem.context.plan_result import OversizedResult
from chatmem.context.values import Conversation, Message, MessageStatus, Mode, Profile


def summary_floor(
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


def oversized_results(
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
