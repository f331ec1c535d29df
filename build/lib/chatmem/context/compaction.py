"""Summaries and summariser rounds (CTX-4, CTX-5, CTX-9..CTX-12, CTX-21).

The engine never calls a model.  When memory must be compressed the plan carries a
:class:`CompactionRequest`: the whole fold it wants before the next request (the range of
stored messages, how many summariser rounds that takes, what it is estimated to cost).  The
rounds themselves are produced one at a time by the driver in :mod:`chatmem.context.folding`
as :class:`SummaryRound` values: a prompt for the summariser, and whether its answer becomes
the stored summary (``commit``) or only carries on to the next piece of an oversized message.

Sizes.  A summary is bounded (:func:`summary_cap` output tokens), so the request that follows
a fold has a known worst case (:func:`new_summary_tokens`).  Each round's input fits the
summariser's own window (``Profile.summarizer_context``): the instructions, the running
summary, the transcript and the answer it may write.

The prompt asks for a structured summary (:data:`SUMMARY_SECTIONS`) so that goals, decisions,
names, numbers and clauses survive verbatim.  The transcript leaves out excluded pairs
(CTX-15).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from chatmem.context.fact_guard import FactGuard
from chatmem.context.prices import cost, summarizer_price_for
from chatmem.context.tokens import MESSAGE_OVERHEAD, Tokenizer
from chatmem.context.values import InstructionsRole, Message, Profile, Summary

#: Most tokens a summary may have; a small window gets less (:func:`summary_cap`).
SUMMARY_OUTPUT_TOKENS = 2_000
#: The least a summary may have, whatever the window.
SUMMARY_MIN_TOKENS = 256
#: Fewer transcript tokens than this in a round: the summariser's window is too small.
MIN_ROUND_TOKENS = 256

SUMMARY_SECTIONS: tuple[str, ...] = (
    "Goal",
    "Constraints and preferences",
    "Decisions",
    "Key facts (names, numbers, clauses verbatim)",
    "Files",
    "Tool results",
    "Open questions and next steps",
)

SUMMARY_INSTRUCTIONS = (
    "You compress the memory of a conversation between a user and an assistant. Write a "
    "summary that lets the assistant continue as if it had read everything. Use exactly these "
    "sections, as Markdown headings, and write 'none' under a section with nothing to say:\n"
    + "\n".join(f"## {section}" for section in SUMMARY_SECTIONS)
    + "\nKeep names, numbers, dates, identifiers and quoted clauses exactly as written. Prefer "
    "facts and decisions over narration. If a previous summary is given, merge it with the new "
    "messages into one summary; never drop a fact from it unless the conversation revised it."
)

SUMMARY_HEADER = "Summary of the earlier conversation (the original messages are not shown):"
#: What the plan shows in place of a summary that the fold will write before sending.
PENDING_SUMMARY = "[a new summary of {n} earlier messages is written before this request is sent]"


def summary_cap(profile: Profile) -> int:
    """Output tokens a summary may have: 2,000, less for small windows (an eighth of the
    smaller of the model's and the summariser's window, at least 256)."""
    window = min(profile.context_window, profile.summarizer_context)
    return max(SUMMARY_MIN_TOKENS, min(SUMMARY_OUTPUT_TOKENS, window // 8))


def new_summary_tokens(profile: Profile) -> int:
    """Worst case of a summary the fold writes, as sent (header and overhead included)."""
    return summary_cap(profile) + MESSAGE_OVERHEAD + 2 * len(SUMMARY_HEADER.split()) + 4


def summary_message(summary: Summary, role: InstructionsRole = "system") -> dict[str, str]:
    """How a summary is sent to the model: one message with the profile's instructions role
    (CTX-9, CTX-22)."""
    return {"role": role, "content": f"{SUMMARY_HEADER}\n\n{summary.text}"}


def summary_tokens(summary: Summary, tokenizer: Tokenizer) -> int:
    if summary.tokens is not None:
        return summary.tokens
    return MESSAGE_OVERHEAD + tokenizer.count(summary_message(summary)["content"])


@dataclass(frozen=True)
class CompactionRequest:
    """The fold the plan wants before the next request (CTX-18's "+ memory compression").

    It covers the stored messages ``first_id`` .. ``through`` (``message_count`` of them);
    afterwards the summary covers ``covered`` messages in all.  ``rounds`` and the costs are
    estimates: the driver decides each round as the summariser's answers come in."""

    first_id: str | None
    through: str
    message_count: int
    covered: int
    rounds: int
    input_tokens: int
    max_output_tokens: int
    estimated_cost: float


@dataclass(frozen=True)
class SummaryRound:
    """One summariser call.  ``commit``: store the answer as the new summary (covering
    ``through``, ``covered`` messages in all); otherwise it is an intermediate summary of a
    message too long for one round, carried into the next piece."""

    prompt: tuple[dict[str, str], ...]
    max_output_tokens: int
    first_id: str
    through: str
    message_count: int  # messages this round folds (0 for an intermediate piece)
    covered: int
    commit: bool
    number: int  # 1-based, within the fold
    rounds: int  # the estimate, at least ``number``
    piece: tuple[int, int] | None  # (k, n): piece k of n of one long pair
    input_tokens: int
    estimated_cost: float
    #: CTX-24: what a committed round's answer is checked against before it is stored
    #: (:meth:`FactGuard.apply` gives the text to store); None for an intermediate piece.
    guard: FactGuard | None = None


def instruction_tokens(tokenizer: Tokenizer) -> int:
    return 2 * MESSAGE_OVERHEAD + tokenizer.count(SUMMARY_INSTRUCTIONS) + 40  # + fixed labels


def round_budget(
    profile: Profile, tokenizer: Tokenizer, running_tokens: int, focus: str | None
) -> int:
    """Transcript tokens one round may carry: the summariser's window less its instructions,
    the running summary, the focus and the answer it may write."""
    fixed = instruction_tokens(tokenizer) + running_tokens
    if focus:
        fixed += tokenizer.count(focus)
    return profile.summarizer_context - summary_cap(profile) - fixed


def transcript_line(message: Message) -> str:
    text = message.content
    if message.tool_calls:
        calls = "; ".join(f"{call.name}({call.arguments})" for call in message.tool_calls)
        text = f"{text}\n[tool calls: {calls}]" if text else f"[tool calls: {calls}]"
    role = "tool result" if message.role == "tool" else message.role
    return f"[{role}] {text}"


def summariser_prompt(
    role: InstructionsRole,
    previous: str | None,
    transcript: str,
    focus: str | None,
    *,
    piece: tuple[int, int] | None = None,
) -> tuple[dict[str, str], ...]:
    """The summariser's messages.  With the ``user`` role the instructions open the user
    message (chat templates that drop system messages would lose them)."""
    parts = []
    if previous is not None:
        parts.append(f"Previous summary:\n{previous}")
    if piece is None:
        parts.append("Conversation to fold into the summary:\n\n" + transcript)
    else:
        k, n = piece
        parts.append(
            f"Part {k} of {n} of one long exchange, to fold into the summary (the other parts "
            f"come in other requests):\n\n{transcript}"
        )
    if focus:
        parts.append(f"What to emphasise: {focus}")
    body = "\n\n".join(parts)
    if role == "user":
        return ({"role": "user", "content": f"{SUMMARY_INSTRUCTIONS}\n\n{body}"},)
    return ({"role": role, "content": SUMMARY_INSTRUCTIONS}, {"role": "user", "content": body})


def estimate_fold(
    profile: Profile,
    tokenizer: Tokenizer,
    *,
    fold_tokens: int,
    running_tokens: int,
    focus: str | None,
) -> tuple[int, int, float]:
    """(rounds, input tokens, cost) of folding ``fold_tokens`` transcript tokens, the first
    round carrying a running summary of ``running_tokens`` and the later ones a new summary
    at its cap."""
    cap = summary_cap(profile)
    first = max(MIN_ROUND_TOKENS, round_budget(profile, tokenizer, running_tokens, focus))
    later = max(MIN_ROUND_TOKENS, round_budget(profile, tokenizer, cap, focus))
    rounds = 1 + max(0, math.ceil((fold_tokens - first) / later))
    overhead = instruction_tokens(tokenizer) + (tokenizer.count(focus) if focus else 0)
    input_tokens = fold_tokens + running_tokens + rounds * overhead + (rounds - 1) * cap
    prices = summarizer_price_for(profile)
    estimated = 0.0
    if not prices.free:
        estimated = round(
            cost(input_tokens, prices.input_per_mtok) + cost(rounds * cap, prices.output_per_mtok),
            8,
        )
    return rounds, input_tokens, estimated


def round_cost(profile: Profile, input_tokens: int) -> float:
    prices = summarizer_price_for(profile)
    if prices.free:
        return 0.0
    return round(
        cost(input_tokens, prices.input_per_mtok)
        + cost(summary_cap(profile), prices.output_per_mtok),
        8,
    )


def split_to_fit(text: str, budget: int, tokenizer: Tokenizer) -> str:
    """The longest prefix of ``text`` (cut at a line or word when one is near) whose count is
    within ``budget`` tokens; at least one character."""
    if tokenizer.count(text) <= budget:
        return text
    size = min(len(text), max(1, budget * 4))
    while size > 1:
        count = tokenizer.count(text[:size])
        if count <= budget:
            break
        size = max(1, min(size - 1, int(size * budget / count * 0.95)))
    head = text[:size]
    for sep in ("\n", " "):
        at = head.rfind(sep)
        if at > size * 0.8:
            return head[: at + 1]
    return head


def pair_end(messages: Sequence[Message], start: int, stop: int) -> int:
    """End (exclusive) of the pair starting at ``start``: the next user message or ``stop``."""
    j = start + 1
    while j < stop and messages[j].role != "user":
        j += 1
    return j
