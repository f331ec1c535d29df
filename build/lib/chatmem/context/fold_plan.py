"""The fold a plan wants (CTX-4, CTX-5, CTX-10, CTX-21): where it starts and ends, and its price.

The mode's policy (:mod:`chatmem.context.policy`) names a *floor* when it wants a fold
(:func:`fold_floor`); :func:`after_fold` then keeps, newest first, the pairs above it that fit
beside a new summary at its cap, and :func:`fold_request` prices the fold.  A fold ends with a
pair it summarises (:func:`trim_excluded`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from chatmem.context.compaction import (
    CompactionRequest,
    estimate_fold,
    new_summary_tokens,
    summary_cap,
)
from chatmem.context.history import TokensOf, find_backward, tokens_between
from chatmem.context.images import Rider
from chatmem.context.modes import Selection, economy_floor, full_floor, select_pairs
from chatmem.context.policy import noticeably_unloads, over_threshold
from chatmem.context.tokens import Tokenizer
from chatmem.context.values import Conversation, Message, Mode, Profile


@dataclass(frozen=True)
class Fold:
    start: int  # first index after the summary
    cut: int  # the verbatim tail starts here


def fold_floor(
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
    if not chosen.overflow and not over_threshold(profile, request_tokens):
        return None  # CTX-5: below the threshold the whole history is sent
    return full_floor(chosen, profile, messages, history_stop, through, tokens_of)


def after_fold(
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
) -> tuple[Fold, Selection] | None:
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
    start = after_summary(before, conversation, messages)
    cut = trim_excluded(messages, start, after.lo)
    if cut <= start:
        return None
    if not before.overflow and mode == "full":
        # CTX-5: a fold the request does not need must noticeably unload it.
        used_before = profile.context_window - profile.answer_reserve - budget
        used_before += current_summary_tokens + before.tokens
        saved = before.tokens - after.tokens + current_summary_tokens - new_summary
        if not noticeably_unloads(saved, used_before):
            return None
    # The tail as sent is whole: nothing in it overflows once the fold is made.
    after.overflow = False
    after.overflow_pair = None
    return Fold(start, cut), after


def fold_request(
    messages: Sequence[Message],
    fold: Fold,
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


def after_summary(
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
