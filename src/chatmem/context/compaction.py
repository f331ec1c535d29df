"""Compaction requests (CTX-4, CTX-5, CTX-9..CTX-11): what to summarise, and the prompt.

The engine never calls a model.  When memory must be compressed it returns a
:class:`CompactionRequest`: the range of stored messages to fold (``first_id`` .. ``through``),
the chat messages to send to the summariser, and what that is estimated to cost.  The caller
runs it and stores ``Summary(text, through=request.through)``; a failed call changes nothing
(CTX-12).  The new summary replaces the previous one, whose text is part of the prompt, so a
summary always covers a prefix of the history.

The prompt asks for a structured summary (:data:`SUMMARY_SECTIONS`) so that goals, decisions,
names, numbers and clauses survive verbatim.  The transcript leaves out excluded pairs
(CTX-15).  It is cut at a pair boundary so that it fits the summariser's window; a very long
backlog is then folded by several requests in a row (plan again after each).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from chatmem.context.prices import cost, summarizer_price_for
from chatmem.context.tokens import MESSAGE_OVERHEAD, Tokenizer, count_message
from chatmem.context.values import Message, Profile, Summary

# Tokens the summariser may write.  Generous: a summary that is cut off loses the end sections.
SUMMARY_OUTPUT_TOKENS = 2_000

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


@dataclass(frozen=True)
class CompactionRequest:
    """A summariser call the caller should make (and pay for) before the next request."""

    first_id: str | None
    through: str
    message_count: int
    prompt: tuple[dict[str, str], ...]
    input_tokens: int
    max_output_tokens: int
    estimated_cost: float


def summary_message(summary: Summary) -> dict[str, str]:
    """How a summary is sent to the model: one system message (CTX-9)."""
    return {"role": "system", "content": f"{SUMMARY_HEADER}\n\n{summary.text}"}


def summary_tokens(summary: Summary, tokenizer: Tokenizer) -> int:
    if summary.tokens is not None:
        return summary.tokens
    return MESSAGE_OVERHEAD + tokenizer.count(summary_message(summary)["content"])


def _instruction_tokens(tokenizer: Tokenizer) -> int:
    return 2 * MESSAGE_OVERHEAD + tokenizer.count(SUMMARY_INSTRUCTIONS) + 40  # + fixed labels


def _transcript_line(message: Message) -> str:
    text = message.content
    if message.tool_calls:
        calls = "; ".join(f"{call.name}({call.arguments})" for call in message.tool_calls)
        text = f"{text}\n[tool calls: {calls}]" if text else f"[tool calls: {calls}]"
    role = "tool result" if message.role == "tool" else message.role
    return f"[{role}] {text}"


def build_request(
    messages: Sequence[Message],
    start: int,
    stop: int,
    *,
    summary: Summary | None,
    profile: Profile,
    tokenizer: Tokenizer,
    focus: str | None = None,
) -> CompactionRequest | None:
    """Fold ``messages[start:stop]`` (a run of whole pairs) into a request, or None if empty.

    Walks forward pair by pair and stops before the pair that would overflow the summariser's
    window; the first pair is always taken (cut to fit if it alone is too large)."""
    if stop <= start:
        return None
    fixed = _instruction_tokens(tokenizer)
    if summary is not None:
        fixed += summary_tokens(summary, tokenizer)
    if focus:
        fixed += tokenizer.count(focus)
    budget = max(0, profile.context_window - SUMMARY_OUTPUT_TOKENS - fixed)

    lines: list[str] = []
    used = 0
    through = start
    i = start
    while i < stop:
        j = i + 1  # the pair is messages[i:j]
        while j < stop and messages[j].role != "user":
            j += 1
        pair = messages[i:j]
        pair_tokens = sum(
            m.tokens if m.tokens is not None else count_message(m, tokenizer) for m in pair
        )
        if used + pair_tokens > budget and i > start:
            break
        if not any(m.excluded for m in pair):
            pair_lines = [_transcript_line(m) for m in pair]
            if used + pair_tokens > budget:  # the first pair alone is too long: cut it
                text = "\n\n".join(pair_lines)
                keep = max(0, budget) * 2  # >= 2 characters a token on ordinary text
                pair_lines = [f"{text[:keep]}\n[… {len(text) - keep} characters omitted …]"]
                pair_tokens = tokenizer.count(pair_lines[0])
            lines.extend(pair_lines)
            used += pair_tokens
        through = j
        i = j

    parts = []
    if summary is not None:
        parts.append(f"Previous summary:\n{summary.text}")
    parts.append("Conversation to fold into the summary:\n\n" + "\n\n".join(lines))
    if focus:
        parts.append(f"What to emphasise: {focus}")
    prompt = (
        {"role": "system", "content": SUMMARY_INSTRUCTIONS},
        {"role": "user", "content": "\n\n".join(parts)},
    )
    input_tokens = fixed + used
    prices = summarizer_price_for(profile)
    estimated = 0.0
    if not prices.free:
        estimated = round(
            cost(input_tokens, prices.input_per_mtok)
            + cost(SUMMARY_OUTPUT_TOKENS, prices.output_per_mtok),
            8,
        )
    return CompactionRequest(
        first_id=messages[start].id,
        through=messages[through - 1].id,
        message_count=through - start,
        prompt=prompt,
        input_tokens=input_tokens,
        max_output_tokens=SUMMARY_OUTPUT_TOKENS,
        estimated_cost=estimated,
    )
