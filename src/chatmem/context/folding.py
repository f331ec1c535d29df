"""The fold driver: one compaction loop for every caller (CTX-4, CTX-5, CTX-11, CTX-12, CTX-21).

Theory of operation
-------------------
:func:`fold` is a generator in the sans-I/O style (like httpx's ``Auth.auth_flow``): it
*yields* :class:`~chatmem.context.compaction.SummaryRound` values — summariser requests — and
*receives* the summariser's text through ``send``; it returns a :class:`FoldResult` when
memory is folded as far as the plan needs.  It never calls a model.  The turn runner (async),
"Compress now" (async) and ``chatmem context plan --compact`` (sync, a stub summariser) all
drive this same loop; :func:`run_fold` is the sync driver.

1. The plan (:func:`chatmem.context.plan.plan`) names the fold: the stored messages from the
   summary's end up to ``covered`` (the *goal*).  "Compress now" names its own goal
   (:func:`~chatmem.context.plan.manual_fold`).
2. The goal is folded in rounds, oldest first.  A round takes whole pairs while its
   transcript fits the summariser's window beside the instructions, the running summary and
   the answer it may write (:func:`~chatmem.context.compaction.round_budget`).  Its answer is
   the new summary: the caller stores it (``commit``) before sending the next answer, so a
   failure at any round leaves the summary of the rounds before it, consistent with the
   history (CTX-12).
3. A pair too long for one round by itself is summarised in pieces: each piece's prompt
   carries the summary so far, and only the last piece's answer is stored (``commit``), so
   the summary never covers part of a message.
4. At the goal the driver plans again; when the plan still wants a fold (a new summary longer
   than estimated, say) it folds on, towards the new goal.  Every round moves past at least
   one message or one piece of one, so the loop ends: at most one round per piece of the
   history's text, and in practice about ``fold tokens / round budget`` rounds.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass, replace

from chatmem.context.compaction import (
    MIN_ROUND_TOKENS,
    SummaryRound,
    estimate_fold,
    instruction_tokens,
    pair_end,
    round_budget,
    round_cost,
    split_to_fit,
    summariser_prompt,
    summary_cap,
    summary_tokens,
    transcript_line,
)
from chatmem.context.errors import EngineError
from chatmem.context.fact_guard import FactGuard, FactMemo, Guarded
from chatmem.context.history import find_backward, tokens_between
from chatmem.context.modes import effective_mode
from chatmem.context.plan import _plan, manual_fold
from chatmem.context.plan_result import Plan
from chatmem.context.tokens import MESSAGE_OVERHEAD, Tokenizer, count_message, get_tokenizer
from chatmem.context.values import Conversation, Message, Mode, Profile, Summary

#: Tokens allowed for the blank line between two transcript lines and a word split at a join.
SEPARATOR_TOKENS = 3


class SummariserWindowTooSmall(EngineError):
    """The running summary leaves the summariser no room for the conversation."""


@dataclass(frozen=True)
class FoldResult:
    """What a fold did: the summary it stored last (None: no round was stored), the summariser
    calls it made, the messages it folded, and the plan after it."""

    summary: Summary | None
    rounds: int
    folded: int
    plan: Plan


FoldFlow = Generator[SummaryRound, str, FoldResult]


def fold(
    conversation: Conversation,
    profile: Profile,
    *,
    mode: Mode,
    draft: str | None = None,
    turn_start: str | None = None,
    tokenizer: Tokenizer | None = None,
    focus: str | None = None,
    manual: bool = False,
    facts: FactMemo | None = None,
) -> FoldFlow:
    """Fold ``conversation``'s memory as far as the next request needs (``manual``: as far as
    "Compress now" does).  Yields summariser rounds, receives their texts.  ``facts``: the
    fact guard's memo of the caller's (the turn service's)."""
    tok = tokenizer if tokenizer is not None else get_tokenizer(profile.tokenizer)
    mode = effective_mode(profile, mode)

    def replan(conv: Conversation) -> Plan:
        return _plan(conv, profile, mode, draft, turn_start, tok, focus)

    if manual:
        request = manual_fold(
            conversation, profile, tok, mode=mode, focus=focus, turn_start=turn_start
        )
    else:
        request = replan(conversation).compaction.request
    rounds = _Rounds(profile, tok, focus, conversation.messages, facts)
    progress = _Progress(conversation)
    while request is not None:
        goal = request.covered
        pos = _after_summary(progress.conv)
        if goal <= pos:
            break
        yield from _fold_to(rounds, progress, pos, goal)
        if manual:
            break
        following = replan(progress.conv).compaction.request
        if following is None or following.covered <= goal:
            break  # folded as far as the plan wants (or no further fold is possible)
        request = following
    return FoldResult(
        summary=progress.stored,
        rounds=progress.number,
        folded=progress.folded,
        plan=replan(progress.conv),
    )


@dataclass(frozen=True, slots=True)
class _Rounds:
    """What every round of one fold reads."""

    profile: Profile
    tok: Tokenizer
    focus: str | None
    messages: Sequence[Message]
    facts: FactMemo | None = None

    def tokens_of(self, message: Message) -> int:
        return count_message(message, self.tok)

    def rounds_left(self, after: int, goal: int) -> int:
        """Rounds still to come for the messages from ``after`` to ``goal``."""
        remaining = tokens_between(self.messages, after, goal, self.tokens_of)
        return _rounds_left(self.profile, self.tok, remaining, self.focus)


@dataclass(slots=True)
class _Progress:
    """A fold so far: the conversation with the summary stored last, the rounds yielded and
    the messages folded."""

    conv: Conversation
    number: int = 0
    folded: int = 0
    stored: Summary | None = None

    def store(self, text: str, guard: FactGuard, first: int, stop: int, rounds: _Rounds) -> None:
        """The round's answer, guarded (CTX-24), becomes the summary, covering the messages
        up to ``stop``."""
        through = rounds.messages[stop - 1].id
        guarded = guard.apply(text)
        self.stored = _summary(self.conv, guarded, through, rounds.focus, rounds.tok)
        self.conv = replace(self.conv, summary=self.stored)
        self.folded += stop - first


def _fold_to(
    rounds: _Rounds, progress: _Progress, pos: int, goal: int
) -> Generator[SummaryRound, str, None]:
    """The rounds that fold the messages from ``pos`` up to ``goal``: as many whole pairs as
    fit each round, a pair longer than a round in pieces (CTX-21)."""
    tok = rounds.tok
    while pos < goal:
        running = progress.conv.summary
        running_tokens = summary_tokens(running, tok) if running is not None else 0
        budget = _budget(rounds.profile, tok, running_tokens, rounds.focus)
        lines, used, stop = _round_lines(rounds, pos, goal, budget)
        if lines:
            progress.number += 1
            input_tokens = instruction_tokens(tok) + running_tokens + used
            guard = fact_guard(rounds, running, pos, stop)
            text = yield SummaryRound(
                prompt=summariser_prompt(
                    rounds.profile.instructions_role,
                    running.text if running is not None else None,
                    "\n\n".join(lines),
                    rounds.focus,
                ),
                max_output_tokens=summary_cap(rounds.profile),
                first_id=rounds.messages[pos].id,
                through=rounds.messages[stop - 1].id,
                message_count=stop - pos,
                covered=stop,
                commit=True,
                number=progress.number,
                rounds=progress.number + rounds.rounds_left(stop, goal),
                piece=None,
                input_tokens=input_tokens,
                estimated_cost=round_cost(rounds.profile, input_tokens),
                guard=guard,
            )
            progress.store(text, guard, pos, stop, rounds)
            pos = stop
            continue
        if stop >= goal:
            # only excluded pairs were left: nothing to summarise (the plan trims them)
            break
        end = pair_end(rounds.messages, stop, goal)
        running_text = running.text if running is not None else None
        guard = fact_guard(rounds, running, pos, end)
        text = yield from _pieces(rounds, progress, running_text, (pos, stop, end), goal, guard)
        progress.store(text, guard, pos, end, rounds)
        pos = end


def _round_lines(rounds: _Rounds, pos: int, goal: int, budget: int) -> tuple[list[str], int, int]:
    """The transcript lines of the whole pairs from ``pos`` that fit ``budget`` tokens, their
    tokens, and where they stop.  Excluded pairs are covered by the summary, never in its
    text (CTX-15); no lines: the pair at the stop is too long for a round by itself."""
    messages, tok = rounds.messages, rounds.tok
    lines: list[str] = []
    used = 0
    i = pos
    while i < goal:
        j = pair_end(messages, i, goal)
        pair = messages[i:j]
        if any(m.excluded for m in pair):
            i = j
            continue
        # The transcript as written is counted (labels and separators included): the round
        # must fit the summariser's window as it will be sent.
        pair_lines = [transcript_line(m) for m in pair]
        cost = sum(tok.count(line) + SEPARATOR_TOKENS for line in pair_lines)
        if (lines and used + cost > budget) or (not lines and cost > budget):
            break
        lines.extend(pair_lines)
        used += cost
        i = j
    return lines, used, i


def _pieces(
    rounds: _Rounds,
    progress: _Progress,
    interim: str | None,
    span: tuple[int, int, int],
    goal: int,
    guard: FactGuard,
) -> Generator[SummaryRound, str, str]:
    """One pair (``start`` to ``end`` of ``span``, the fold from ``first``) longer than a
    round: its transcript in pieces, each round carrying the summary so far (CTX-21).
    Returns the last round's answer (the one ``guard`` checks)."""
    first, start, end = span
    profile, tok, focus, messages = rounds.profile, rounds.tok, rounds.focus, rounds.messages
    transcript = "\n\n".join(transcript_line(m) for m in messages[start:end])
    offset = 0
    k = 0
    later = _budget(profile, tok, MESSAGE_OVERHEAD + summary_cap(profile), focus)
    pieces = max(1, math.ceil(tok.count(transcript) / later))
    while offset < len(transcript):
        k += 1
        interim_tokens = MESSAGE_OVERHEAD + tok.count(interim) if interim is not None else 0
        room = _budget(profile, tok, interim_tokens, focus)
        chunk = split_to_fit(transcript[offset:], room, tok)
        offset += len(chunk)
        last = offset >= len(transcript)
        pieces = k if last else max(pieces, k + 1)
        progress.number += 1
        input_tokens = instruction_tokens(tok) + interim_tokens + tok.count(chunk)
        interim = yield SummaryRound(
            prompt=summariser_prompt(
                profile.instructions_role, interim, chunk, focus, piece=(k, pieces)
            ),
            max_output_tokens=summary_cap(profile),
            first_id=messages[first].id,
            through=messages[end - 1].id,
            message_count=end - first if last else 0,
            covered=end,
            commit=last,
            number=progress.number,
            rounds=progress.number + (pieces - k) + rounds.rounds_left(end, goal),
            piece=(k, pieces),
            input_tokens=input_tokens,
            estimated_cost=round_cost(profile, input_tokens),
            guard=guard if last else None,
        )
    assert interim is not None
    return interim


def run_fold(flow: FoldFlow, summarise: Callable[[SummaryRound], str]) -> FoldResult:
    """Drive ``flow`` synchronously: ``summarise`` answers each round."""
    try:
        request = next(flow)
        while True:
            request = flow.send(summarise(request))
    except StopIteration as done:
        result: FoldResult = done.value
        return result


def _after_summary(conversation: Conversation) -> int:
    summary = conversation.summary
    if summary is None or summary.through is None:
        return 0
    messages = conversation.messages
    return find_backward(messages, summary.through, len(messages)) + 1


def _budget(profile: Profile, tok: Tokenizer, running_tokens: int, focus: str | None) -> int:
    budget = round_budget(profile, tok, running_tokens, focus)
    if budget < MIN_ROUND_TOKENS:
        raise SummariserWindowTooSmall(
            "The summary is too long for the summariser's window: edit the summary to shorten "
            "it, or choose a summariser with a larger window."
        )
    return budget


def _rounds_left(profile: Profile, tok: Tokenizer, remaining: int, focus: str | None) -> int:
    if remaining <= 0:
        return 0
    rounds, _, _ = estimate_fold(
        profile, tok, fold_tokens=remaining, running_tokens=summary_cap(profile), focus=focus
    )
    return rounds


def fact_guard(rounds: _Rounds, running: Summary | None, first: int, stop: int) -> FactGuard:
    """The guard of the round folding messages ``first`` to ``stop`` (CTX-24): their facts
    and those the running summary kept or dropped."""
    carried = (*running.held, *running.kept, *running.dropped) if running is not None else ()
    unlisted = running.dropped_count - len(running.dropped) if running is not None else 0
    return FactGuard(
        carried=carried,
        messages=tuple(rounds.messages[first:stop]),
        cap=summary_cap(rounds.profile),
        tokenizer=rounds.tok,
        carried_dropped=max(0, unlisted),
        memo=rounds.facts,
    )


def _summary(
    conversation: Conversation, guarded: Guarded, through: str, focus: str | None, tok: Tokenizer
) -> Summary:
    previous = conversation.summary
    version = previous.version + 1 if previous is not None else 1
    summary = Summary(
        text=guarded.text,
        through=through,
        version=version,
        focus=focus,
        kept=guarded.kept,
        dropped=guarded.dropped,
        dropped_count=guarded.dropped_count,
        held=guarded.held,
    )
    return replace(summary, tokens=summary_tokens(summary, tok))
