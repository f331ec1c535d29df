"""The ``window`` mode's assembly (CTX-6): the last N messages within C characters.

Assembly runs newest to oldest over *units*: a single message, or an assistant's tool call
together with its results (CTX-20: both or neither, never cut).  A single message that is
longer than the whole limit C is cut to what is left of the budget — not its neighbours —
with :data:`TRUNCATION_MARKER` stating the exact number of characters dropped (the marker
counts toward C), and assembly stops there; a unit that merely does not fit what is left ends
the assembly.  Roles other than ``assistant`` are sent as ``user``, so a tool call is written
into the assistant's text as ``[tool call name(arguments)]`` and its result sent as user text.

The draft (or the turn in progress, which is never cut) is the newest unit and counts toward N
and C like any other.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from chatmem.context.history import PairWalker, TokensOf
from chatmem.context.modes import Selection, tokens_of_cached
from chatmem.context.tokens import MESSAGE_OVERHEAD, Tokenizer
from chatmem.context.values import Message, MessageStatus, Profile

TRUNCATION_MARKER = "[… {dropped} characters omitted …]"


def window_units(
    messages: Sequence[Message], start: int, stop: int
) -> list[tuple[list[int], list[str]]]:
    """CTX-6/CTX-20: the pair as window-mode units, oldest first.  A unit is a list of message
    indices and their texts as sent; an assistant's tool call and its results form one unit.
    Indices of messages not sent at all are listed with ``None`` text by the caller's rule:
    they are left out of every unit."""
    units: list[tuple[list[int], list[str]]] = []
    i = start
    while i < stop:
        m = messages[i]
        if m.role == "tool":
            i += 1  # a result whose call is not right before it: never sent alone (CTX-20)
            continue
        if not m.tool_calls:
            units.append(([i], [m.content]))
            i += 1
            continue
        call_ids = {c.id for c in m.tool_calls}
        j = i + 1
        results: list[int] = []
        while j < stop and messages[j].role == "tool":
            if messages[j].tool_call_id in call_ids:
                results.append(j)
            j += 1
        answered = {messages[k].tool_call_id for k in results}
        kept = [c for c in m.tool_calls if c.id in answered]
        text = m.content
        if kept:
            calls = "\n".join(f"[tool call {c.name}({c.arguments})]" for c in kept)
            text = f"{text}\n{calls}" if text else calls
            units.append(([i, *results], [text] + [messages[k].content for k in results]))
        elif text:
            units.append(([i], [text]))
        i = j
    return units


def truncate(text: str, budget: int) -> str | None:
    """``text`` cut to ``budget`` characters including the marker, or None if even the marker
    does not fit.  The marker states exactly how many characters were dropped."""
    dropped = len(text) - budget  # a first guess, corrected for the marker's own length
    for _ in range(4):
        marker = TRUNCATION_MARKER.format(dropped=dropped)
        keep = budget - len(marker)
        if keep < 0:
            return None
        if len(text) - keep == dropped:
            return text[:keep] + marker
        dropped = len(text) - keep
    return None  # pragma: no cover - converges in two rounds


@dataclass
class WindowBudget:
    """What is left of CTX-6's N messages and C characters while assembling."""

    messages: int
    chars: int
    full_chars: int
    stopped: bool = False

    @classmethod
    def for_profile(cls, profile: Profile) -> WindowBudget:
        return cls(profile.window_messages, profile.window_chars, profile.window_chars)


def take_window_text(text: str, budget: WindowBudget) -> str | None:
    """CTX-6 for one single message: its text as sent (maybe truncated), or None to stop."""
    if budget.stopped or budget.messages < 1:
        budget.stopped = True
        return None
    if len(text) <= budget.chars:
        budget.chars -= len(text)
        budget.messages -= 1
        return text
    budget.stopped = True  # either way assembly ends with this message
    if len(text) <= budget.full_chars:
        return None  # it merely does not fit what is left
    cut = truncate(text, budget.chars)  # longer than the whole limit: cut it, not neighbours
    if cut is not None:
        budget.chars -= len(cut)
        budget.messages -= 1
    return cut


def select_window(
    messages: Sequence[Message],
    stop: int,
    *,
    budget: WindowBudget,
    tokenizer: Tokenizer,
    tokens_of: TokensOf,
) -> Selection:
    """``window``: the newest messages of ``messages[:stop]`` within ``budget`` (CTX-6)."""
    chosen = Selection(lo=stop)
    sent_units: list[list[dict[str, Any]]] = []
    statuses: dict[int, MessageStatus] = {}
    for pair in PairWalker(messages, stop, None, tokens_of):
        if budget.stopped:
            break
        chosen.lo = pair.start
        if pair.excluded:
            for k in range(pair.start, pair.stop):
                statuses[k] = "excluded"
            continue
        for k in range(pair.start, pair.stop):
            statuses[k] = "out_of_memory"
        for indices, texts in reversed(window_units(messages, pair.start, pair.stop)):
            if len(indices) == 1:
                text = take_window_text(texts[0], budget)
                if text is None:
                    break
                message = messages[indices[0]]
                role = "assistant" if message.role == "assistant" else "user"
                sent_units.append([{"role": role, "content": text}])
                if text == texts[0]:
                    chosen.tokens += tokens_of_cached(message, tokens_of)
                else:
                    chosen.tokens += MESSAGE_OVERHEAD + tokenizer.count(text)
            else:  # a tool call with its results: all or nothing, never truncated (CTX-20)
                size = sum(len(t) for t in texts)
                if size > budget.chars or len(indices) > budget.messages:
                    budget.stopped = True
                    break
                budget.chars -= size
                budget.messages -= len(indices)
                sent_units.append(
                    [
                        {
                            "role": "assistant" if messages[k].role == "assistant" else "user",
                            "content": t,
                        }
                        for k, t in zip(indices, texts, strict=True)
                    ]
                )
                chosen.tokens += sum(tokens_of_cached(messages[k], tokens_of) for k in indices)
            for k in indices:
                statuses[k] = "in_memory"
                chosen.in_memory_ids.add(messages[k].id)
            if budget.stopped:
                break
    chosen.sent = [m for unit in reversed(sent_units) for m in unit]
    chosen.explicit = [statuses.get(k, "out_of_memory") for k in range(chosen.lo, stop)]
    return chosen


def assemble_window(
    messages: Sequence[Message],
    history_stop: int,
    draft: str | None,
    profile: Profile,
    tok: Tokenizer,
    tokens_of: Any,
) -> tuple[Selection, list[dict[str, Any]], list[MessageStatus], int, int]:
    """CTX-6 assembly, newest first: the draft, the current turn (never cut), then history.

    Returns the history selection, the turn and draft as sent (oldest first), the turn's
    statuses, and the tokens of the turn and of the draft."""
    budget = WindowBudget.for_profile(profile)
    tail: list[dict[str, Any]] = []
    draft_tokens = 0
    if draft:  # the current message is always sent, cut to C if it alone is longer
        text = take_window_text(draft, budget)
        if text is None:  # N < 1, or C shorter than the marker itself
            budget.stopped = True
            if len(draft) <= budget.full_chars:
                text = draft
            else:  # at worst the bare marker: it says everything was dropped
                marker = TRUNCATION_MARKER.format(dropped=len(draft))
                text = truncate(draft, budget.full_chars) or marker
        tail.append({"role": "user", "content": text})
        draft_tokens = MESSAGE_OVERHEAD + tok.count(text)
    turn_statuses: list[MessageStatus] = []
    turn_tokens = 0
    n = len(messages)
    if history_stop < n:
        statuses: dict[int, MessageStatus] = {}
        turn_sent: list[dict[str, Any]] = []
        for indices, texts in window_units(messages, history_stop, n):
            for k, text in zip(indices, texts, strict=True):
                role = "assistant" if messages[k].role == "assistant" else "user"
                turn_sent.append({"role": role, "content": text})
                statuses[k] = "in_memory"
                cached = messages[k].tokens
                turn_tokens += cached if cached is not None else tokens_of(messages[k])
                budget.chars -= len(text)
                budget.messages -= 1
        if budget.chars < 0 or budget.messages < 0:
            budget.stopped = True
        turn_statuses = [statuses.get(k, "out_of_memory") for k in range(history_stop, n)]
        tail = turn_sent + tail
    chosen = select_window(
        messages, history_stop, budget=budget, tokenizer=tok, tokens_of=tokens_of
    )
    return chosen, tail, turn_statuses, turn_tokens, draft_tokens
