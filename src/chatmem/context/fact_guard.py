"""The fact guard (CTX-24): no hard fact leaves the memory silently.

Theory of operation
-------------------
After each summariser round that becomes the summary, the guard compares the summariser's
text with the hard facts (:mod:`chatmem.context.facts`) of the messages the round folds and
with the facts the previous summary kept or dropped (they carry over through later rounds).
A fact the text does not contain — compared after normalising spaces, case and thousands
separators — is appended verbatim to a last section, :data:`KEPT_HEADING`, with its
message's date, oldest first: a revised value ("the budget is now 5,000 EUR") stands after
the value it replaced, so the model can tell which is current.

The cap.  The whole summary, the model's text and the section, stays within
:func:`~chatmem.context.compaction.summary_cap` tokens, so the plan's worst case
(:func:`~chatmem.context.compaction.new_summary_tokens`) stays true.  When the cap cannot
hold every fact the guard keeps the user's before the others, then the ones repeated more
often, then the newest; the rest are *dropped*: counted and listed (with their message ids)
in the summary's record, named in one line of the section, and found again by ``recall``
(their messages stay stored).  A dropped fact is a candidate again in the next round.

Idempotent.  A section the summariser copied from the previous summary is taken out before
comparing, so guarding a guarded text gives the same text: every driver of the fold can
apply the guard (:meth:`FactGuard.apply`) and get the same summary.

The section's heading is English, like the section headings the summary prompt asks for
(:data:`~chatmem.context.compaction.SUMMARY_SECTIONS`); the memory window shows it under a
translated label.
"""

from __future__ import annotations

import re
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from functools import lru_cache
from typing import cast

from chatmem.context.facts import FactKind, contains, extract, normalise
from chatmem.context.tokens import Tokenizer
from chatmem.context.values import Fact, Message

KEPT_HEADING = "## Kept verbatim"
#: The line that names what the cap left out (the model can then ask ``recall``).
DROPPED_LINE = "({n} more facts did not fit: the recall tool finds them in the earlier messages)"
#: Most dropped facts a summary's record lists (the count stays exact beyond it).
MAX_LISTED_DROPPED = 500
#: Tokens by which a section counted in parts must stay under the cap to skip counting the
#: whole (joined lines count a token or two more or less than their parts).
SLACK = 32
_SECTION = re.compile(r"(?:^|\n)#{1,6}\s*Kept verbatim\s*\n.*?(?=\n#{1,6}\s|\Z)", re.S | re.I)


@dataclass(frozen=True)
class Guarded:
    """A guarded summary: its text and what the guard did: the facts the summariser's own
    words hold (``held``), those the kept section adds (``kept``), those the cap left out
    (``dropped``, the last :data:`MAX_LISTED_DROPPED` of them, ``dropped_count`` in all)."""

    text: str
    held: tuple[Fact, ...] = ()
    kept: tuple[Fact, ...] = ()
    dropped: tuple[Fact, ...] = ()
    dropped_count: int = 0


def facts_of(messages: Iterable[Message]) -> list[Fact]:
    """The hard facts of ``messages`` (excluded ones left out, CTX-15), oldest first."""
    out: list[Fact] = []
    for message in messages:
        if message.excluded:
            continue
        for found in extract(_text_of(message)):
            out.append(Fact(found.text, found.kind, message.id, message.role, message.at))
    return out


def _text_of(message: Message) -> str:
    if not message.tool_calls:
        return message.content
    calls = " ".join(call.arguments for call in message.tool_calls)
    return f"{message.content}\n{calls}" if message.content else calls


class FactMemo:
    """What the guard works out again and again for the same facts — their compared form,
    their time, their line in the section and its tokens — remembered by its owner: facts
    recur round after round (a summary carries them) and across the conversations of one
    process.  The turn service owns one; a guard given none works without (a fresh memo per
    call).  ``bench/memory_quality.py`` measures the guard cold and with one memo kept
    across a run's rounds: 1.0–1.8x faster with it (0.22 against 0.34 ms per 10,000 tokens
    folded with the forgetful summariser at a 1,024-token cap)."""

    def __init__(self, size: int = 16_384) -> None:
        self.key = lru_cache(maxsize=size)(normalise)
        self.when = lru_cache(maxsize=size)(_when)
        self.line = lru_cache(maxsize=size)(_line)
        self._count = lru_cache(maxsize=size)(_count_line)

    def count(self, tokenizer: Tokenizer, line: str) -> int:
        """A line's tokens (tokenizers are immutable and hashable)."""
        return self._count(cast(Hashable, tokenizer), line)


@dataclass(frozen=True)
class FactGuard:
    """What one round's guard compares: the facts carried from the previous summary, the
    folded messages, the cap and the tokenizer it counts with (``memo``: its owner's)."""

    carried: tuple[Fact, ...]
    messages: tuple[Message, ...]
    cap: int
    tokenizer: Tokenizer = field(compare=False)
    carried_dropped: int = 0
    memo: FactMemo | None = field(default=None, compare=False)

    def apply(self, text: str) -> Guarded:
        return guard(
            text,
            [*self.carried, *facts_of(self.messages)],
            self.cap,
            self.tokenizer,
            carried_dropped=self.carried_dropped,
            memo=self.memo,
        )


def guard(
    text: str,
    facts: Sequence[Fact],
    cap: int,
    tokenizer: Tokenizer,
    *,
    carried_dropped: int = 0,
    memo: FactMemo | None = None,
) -> Guarded:
    """``text`` with the ``facts`` it lacks appended (see the module docstring).
    ``facts`` oldest first; ``carried_dropped``: dropped facts of earlier rounds counted but
    no longer listed (beyond :data:`MAX_LISTED_DROPPED`)."""
    memo = memo if memo is not None else FactMemo()
    body = strip_kept(text)
    held, missing = _partition(facts, normalise(body), memo)
    if not missing and not carried_dropped:
        return Guarded(body, held)
    budget = cap - tokenizer.count(body) - memo.count(tokenizer, KEPT_HEADING) - 2
    full = budget
    ranked = sorted(
        range(len(missing)),
        key=lambda i: (missing[i].role != "user", -missing[i].repeats, -i),
    )
    costs = [memo.count(tokenizer, memo.line(fact)) + 1 for fact in missing]
    if carried_dropped or sum(costs) > budget:
        budget -= memo.count(tokenizer, DROPPED_LINE.format(n=len(missing) + carried_dropped)) + 1
    chosen: set[int] = set()
    used = 0
    for i in ranked:
        if used + costs[i] <= budget:
            chosen.add(i)
            used += costs[i]
    while True:
        result = _written(body, held, missing, chosen, carried_dropped, memo)
        if not chosen or used < full - SLACK or tokenizer.count(result.text) <= cap:
            return result
        # Near the cap: the parts counted apart can add up to a little less than the whole.
        chosen.discard(next(i for i in reversed(ranked) if i in chosen))


def _written(
    body: str,
    held: tuple[Fact, ...],
    missing: list[Fact],
    chosen: set[int],
    carried_dropped: int,
    memo: FactMemo,
) -> Guarded:
    kept = tuple(fact for i, fact in enumerate(missing) if i in chosen)
    dropped = [fact for i, fact in enumerate(missing) if i not in chosen]
    count = len(dropped) + carried_dropped
    lines = [memo.line(fact) for fact in kept]
    if count:
        lines.append(DROPPED_LINE.format(n=count))
    text = f"{body}\n\n{KEPT_HEADING}\n" + "\n".join(lines) if lines else body
    return Guarded(text, held, kept, tuple(dropped[-MAX_LISTED_DROPPED:]), count)


def strip_kept(text: str) -> str:
    """``text`` without a kept section (one the summariser copied, or the guard wrote)."""
    if "erbatim" not in text:
        return text.strip()
    return _SECTION.sub("", text).strip()


def _partition(
    facts: Sequence[Fact], seen: str, memo: FactMemo
) -> tuple[tuple[Fact, ...], list[Fact]]:
    """The facts ``seen`` (a normalised text) holds and those it lacks, each once and in
    date order: a fact stated again counts as repeated and stands where it was stated last
    (its newest statement is its place)."""
    by_key: dict[str, Fact] = {}
    for fact in sorted(facts, key=memo.when):
        key = memo.key(fact.text)
        earlier = by_key.pop(key, None)
        if earlier is not None:
            role = "user" if "user" in (earlier.role, fact.role) else fact.role
            fact = replace(fact, repeats=earlier.repeats + fact.repeats, role=role)
        by_key[key] = fact
    held: list[Fact] = []
    missing: list[tuple[str, Fact]] = []
    for key, fact in by_key.items():
        if contains(seen, key):
            held.append(fact)
        else:
            missing.append((key, fact))
    # A bare number that a missing amount states ("12,500" beside "12,500 euros") is written
    # once, with its unit.
    amounts = {part for key, f in missing if f.kind == "amount" for part in key.split(" ")}
    return tuple(held), [f for key, f in missing if f.kind != "number" or key not in amounts]


_NEVER = datetime.max


def _when(fact: Fact) -> datetime:
    """A fact's time for ordering (aware times as UTC); unknown: after every known one."""
    at = fact.at
    if at is None:
        return _NEVER
    if at.tzinfo is not None:
        at = at.astimezone(UTC).replace(tzinfo=None)
    return at


def _count_line(tokenizer: Hashable, line: str) -> int:
    return cast(Tokenizer, tokenizer).count(line)


def _line(fact: Fact) -> str:
    return f"- {fact.text} ({_date(fact.at)})" if fact.at is not None else f"- {fact.text}"


def _date(at: datetime) -> str:
    return at.strftime("%Y-%m-%d")


def kinds(facts: Iterable[Fact]) -> dict[FactKind, int]:
    """How many facts of each kind (for reports)."""
    out: dict[FactKind, int] = {}
    for fact in facts:
        out[fact.kind] = out.get(fact.kind, 0) + 1
    return out
