"""Recall: the model looks up what left its memory (issue 17).

Theory of operation
-------------------
A summary keeps the gist of what it folds (CTX-9); the exact sentence — "the budget we
agreed is 48,250 euros" — may not survive it.  Recall is a built-in tool, ``recall(query,
limit)``, offered to the model beside the MCP tools: it searches *this* conversation's
messages that the request does not carry (summarised, out of memory, excluded) and returns
the best passages verbatim, with their message ids and times.  The summary keeps the gist;
recall fetches the verbatim text on demand.

This module holds the pure parts; the turn runner asks the store for the matches.

Switch (:func:`recall_enabled`)
    The conversation's choice (true/false), else its profile's, else the default: on in
    the memory modes that fold history into a summary (``economy`` and ``full``), off in
    ``off`` and ``window``.  When it is on the tool's schema is sent with every request and
    counted in the plan's Tools row like any tool definition (CTX-1).
Scope (:func:`recall_scope`)
    Never another conversation (CTX-8: the store's query is scoped to one conversation id),
    never a message the request already carries: a plan's statuses say which those are.
    Everything older than the tail the plan walked is summarised, out of memory or excluded;
    in the tail, every message whose status is not ``in_memory``.  A message stored after
    the plan (the call's own assistant message) is not in the scope.
Bound (:func:`render_recall`)
    The result is at most ``budget`` tokens, header included.  Each match gets a share of
    what is left; a message longer than its share is cut to the passage around the query's
    words — whole sentences when they fit, else whole words — and every cut is marked with
    a visible ``…``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from chatmem.context.modes import SUMMARY_MODES
from chatmem.context.status import StatusMap
from chatmem.context.tokens import Tokenizer
from chatmem.context.values import MessageStatus, Mode

RECALL_TOOL = "recall"
#: Passages a call returns when the model names no limit, and the most it may ask for.
DEFAULT_LIMIT = 5
MAX_LIMIT = 20
#: The most tokens one result may take (a fraction of the free window may set less).
MAX_RESULT_TOKENS = 2_000
#: A passage is not worth sending below this many tokens.
MIN_PASSAGE_TOKENS = 24
#: The least a result may take: a header and a passage or two.
MIN_RESULT_TOKENS = 200
#: How far a passage may reach from its match: characters per token of its budget (far
#: more than any text takes, so the reach never shortens a passage that would fit).
CHARS_PER_TOKEN_MAX = 16
#: Matches of the query's words weighed in one message, and how far around each its
#: sentence is looked for (characters).
MAX_MATCHES = 200
SENTENCE_REACH = 2_000
#: How much of the query the result's header repeats (characters).
QUERY_SHOWN = 100
ELLIPSIS = "…"

RECALL_SCHEMA: Mapping[str, Any] = {
    "type": "function",
    "function": {
        "name": RECALL_TOOL,
        "description": (
            "Search the earlier messages of this conversation that are no longer in your "
            "context (summarised or left out) and return the best matching passages "
            "verbatim, with their message ids and times. Use it when you need an exact "
            "detail the summary does not give: a number, a name, a date, a quote, a decision."
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "query": {
                    "type": "string",
                    "description": "Words to look for, e.g. 'budget euros agreed'.",
                },
                "limit": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": MAX_LIMIT,
                    "description": f"How many passages at most (default {DEFAULT_LIMIT}).",
                },
            },
            "required": ["query"],
        },
    },
}

_WORD = re.compile(r"\w+", re.UNICODE)
# A sentence ends at . ! ? … (and the CJK full stop) followed by space, or at a line break.
_SENTENCE = re.compile(r"[^\n]*?(?:[.!?…。](?=\s)|\n|$)", re.UNICODE)
_NONSPACE = re.compile(r"\S+")


def recall_enabled(mode: Mode, conversation: bool | None, profile: bool | None) -> bool:
    """Whether the tool is offered: the conversation's choice, else the profile's, else on
    in the summary modes."""
    if conversation is not None:
        return conversation
    if profile is not None:
        return profile
    return mode in SUMMARY_MODES


def with_recall(tools: Sequence[Mapping[str, Any]], enabled: bool) -> Sequence[Mapping[str, Any]]:
    """The tool schemas a request offers: ``tools``, and recall's when it is on (an MCP tool
    of the same name then gives way: the name is the built-in's)."""
    if not enabled:
        return tools
    others = [t for t in tools if t.get("function", {}).get("name") != RECALL_TOOL]
    return [*others, RECALL_SCHEMA]


def query_words(query: str) -> list[str]:
    """The words of a query, lower case (what a passage is centred on)."""
    return [w.lower() for w in _WORD.findall(query)]


@dataclass(frozen=True)
class RecallScope:
    """The messages a call may return: every message stored before ``before`` (an id; None:
    none by position) and the ids in ``also``."""

    before: str | None
    also: frozenset[str] = frozenset()


def recall_scope(status: Mapping[str, MessageStatus]) -> RecallScope:
    """What the request planned with ``status`` does not carry."""
    tail = status.tail() if isinstance(status, StatusMap) else dict(status)
    first = next(iter(tail), None)
    return RecallScope(
        before=first,
        also=frozenset(mid for mid, s in tail.items() if s != "in_memory"),
    )


def result_budget(free_tokens: int) -> int:
    """Tokens one result may take: at most :data:`MAX_RESULT_TOKENS`, and at most half of
    what the window has free (so the answer after it still fits), never below one passage."""
    return max(MIN_RESULT_TOKENS, min(MAX_RESULT_TOKENS, free_tokens // 2))


@dataclass(frozen=True)
class RecallHit:
    """One matching message (best first, as the store ranked them)."""

    message_id: str
    role: str
    created_at: str  # ISO time, UTC
    content: str


# --------------------------------------------------------------------------- passages


def _matches(piece: str, words: Sequence[str]) -> int:
    """How many of the query's words ``piece`` holds (as a word or a word's start)."""
    found = {w.lower() for w in _WORD.findall(piece)}
    return sum(1 for q in set(words) if any(f.startswith(q) for f in found))


def _spans(
    text: str, pattern: re.Pattern[str], lo: int = 0, hi: int | None = None
) -> list[tuple[int, int]]:
    """Non-empty stripped spans of ``text[lo:hi]`` matched by ``pattern``, in order, as
    offsets into ``text``."""
    out: list[tuple[int, int]] = []
    for m in pattern.finditer(text, lo, len(text) if hi is None else hi):
        start, end = m.span()
        while start < end and text[start].isspace():
            start += 1
        while end > start and text[end - 1].isspace():
            end -= 1
        if end > start:
            out.append((start, end))
    return out


def _containing(spans: Sequence[tuple[int, int]], position: int) -> int:
    """Index of the span holding ``position`` (else the last one before it, else 0)."""
    found = 0
    for index, (start, _end) in enumerate(spans):
        if start > position:
            break
        found = index
    return found


def _starts(text: str, words: Sequence[str]) -> list[int]:
    """Where the query's words start a word of ``text``, in order (at most
    :data:`MAX_MATCHES`).  Plain substring search on the lower-cased text: a regular
    expression with case folding reads a megabyte several times slower."""
    lowered = text.lower()  # a few characters change length: positions stay approximate
    found: list[int] = []
    for word in {w.lower() for w in words if w}:
        at = lowered.find(word)
        while at != -1 and len(found) < MAX_MATCHES * 4:
            if at == 0 or not lowered[at - 1].isalnum():
                found.append(min(at, len(text) - 1))
            at = lowered.find(word, at + 1)
    return sorted(found)[:MAX_MATCHES]


def _focus(text: str, words: Sequence[str]) -> int:
    """Where a passage is centred: the first match of the query's words in the sentence
    holding most of them (0 when none matches: the search index folds what a plain search
    does not, accents for one)."""
    best, best_score = 0, 0
    for at in _starts(text, words):
        lo, hi = max(0, at - SENTENCE_REACH), min(len(text), at + SENTENCE_REACH)
        sentences = _spans(text, _SENTENCE, lo, hi)
        start, end = sentences[_containing(sentences, at)] if sentences else (lo, hi)
        score = _matches(text[start:end], words)
        if score > best_score:
            best, best_score = at, score
    return best


def _marked(text: str, start: int, end: int) -> str:
    """``text[start:end]`` with ``…`` where it was cut."""
    head = ELLIPSIS + " " if start > 0 else ""
    tail = " " + ELLIPSIS if end < len(text) else ""
    return f"{head}{text[start:end]}{tail}"


def _grow(
    text: str,
    spans: Sequence[tuple[int, int]],
    anchor: int,
    budget: int,
    tokenizer: Tokenizer,
) -> str | None:
    """A run of ``spans`` around ``anchor``, grown on both sides in turn while it fits
    ``budget`` with its marks; None when the anchor alone does not.  Each side's step
    doubles while it fits and halves when it does not, so a passage of a thousand words
    costs a few dozen counts, not a thousand."""
    lo = hi = anchor
    best = _marked(text, spans[lo][0], spans[hi][1])
    if tokenizer.count(best) > budget:
        return None
    after = before = 1
    while after or before:
        if after:
            reach = min(len(spans) - 1, hi + after)
            candidate = _marked(text, spans[lo][0], spans[reach][1])
            if reach > hi and tokenizer.count(candidate) <= budget:
                hi, best, after = reach, candidate, after * 2
            else:
                after //= 2
        if before:
            reach = max(0, lo - before)
            candidate = _marked(text, spans[reach][0], spans[hi][1])
            if reach < lo and tokenizer.count(candidate) <= budget:
                lo, best, before = reach, candidate, before * 2
            else:
                before //= 2
    return best


def _chars(text: str, budget: int, tokenizer: Tokenizer) -> str:
    """The longest prefix of one unbroken word that fits ``budget`` with its mark."""
    low, high = 0, len(text)
    while low < high:
        mid = (low + high + 1) // 2
        if tokenizer.count(text[:mid] + " " + ELLIPSIS) <= budget:
            low = mid
        else:
            high = mid - 1
    return text[:low] + " " + ELLIPSIS if low < len(text) else text


def passage(text: str, words: Sequence[str], budget: int, tokenizer: Tokenizer) -> str:
    """``text`` whole when it fits ``budget`` tokens; else the passage around the query's
    words, cut at sentence bounds (at word bounds when one sentence is too long), each cut
    marked ``…``.  Never more than ``budget`` tokens.  Only the part of a long message
    within reach of the match is read (``budget`` x :data:`CHARS_PER_TOKEN_MAX` characters
    each way), so a megabyte costs no more than a page."""
    text = text.strip()
    reach = budget * CHARS_PER_TOKEN_MAX
    if len(text) <= reach and tokenizer.count(text) <= budget:
        return text
    focus = _focus(text, words)
    lo, hi = max(0, focus - reach), min(len(text), focus + reach)
    sentences = _spans(text, _SENTENCE, lo, hi)
    start, end = lo, hi
    if sentences:
        anchor = _containing(sentences, focus)
        grown = _grow(text, sentences, anchor, budget, tokenizer)
        if grown is not None:
            return grown
        start, end = sentences[anchor]
    # One sentence longer than the budget: the words around the match in it.
    words_near = _spans(text, _NONSPACE, max(start, lo), min(end, hi)) or [(lo, hi)]
    anchor = _containing(words_near, focus)
    grown = _grow(text, words_near, anchor, budget, tokenizer)
    if grown is not None:
        return grown
    w_start, w_end = words_near[anchor]
    head = ELLIPSIS + " " if w_start > 0 else ""
    return head + _chars(text[w_start:w_end], budget - tokenizer.count(head), tokenizer)


# --------------------------------------------------------------------------- the result


def _shown(query: str) -> str:
    return query if len(query) <= QUERY_SHOWN else query[:QUERY_SHOWN] + ELLIPSIS


def _header(query: str) -> str:
    return (
        f'Earlier messages of this conversation matching "{_shown(query)}" that are not in '
        "your context, verbatim, best match first:"
    )


def _label(hit: RecallHit) -> str:
    return f"[message {hit.message_id} · {hit.role} · {hit.created_at}]"


def no_matches(query: str) -> str:
    return (
        f"No earlier message of this conversation outside your context matches "
        f'"{_shown(query)}". '
        "Try other words."
    )


def render_recall(query: str, hits: Sequence[RecallHit], budget: int, tokenizer: Tokenizer) -> str:
    """The tool's result: a header and one block per match (its id, role, time and passage),
    at most ``budget`` tokens in all.  Each match gets an even share of what is left, so a
    short match leaves room for the next; matches that no longer get a worthwhile share are
    counted in a closing line."""
    if not hits:
        return no_matches(query)
    words = query_words(query)
    parts = [_header(query)]
    used = tokenizer.count(parts[0])
    left_out = 0
    for index, hit in enumerate(hits):
        label = _label(hit)
        share = (budget - used - 16) // (len(hits) - index) - tokenizer.count(label) - 2
        if share < MIN_PASSAGE_TOKENS:
            left_out = len(hits) - index
            break
        block = f"{label}\n{passage(hit.content, words, share, tokenizer)}"
        parts.append(block)
        used = tokenizer.count("\n\n".join(parts))
    if left_out:
        parts.append(f"({left_out} more matching messages left out: ask a narrower query.)")
    text = "\n\n".join(parts)
    # Token counts are not quite additive: drop blocks from the end until the whole fits.
    while tokenizer.count(text) > budget and len(parts) > 1:
        parts.pop()
        text = "\n\n".join(parts)
    return text
