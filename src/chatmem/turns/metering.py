"""What a model call cost when the provider did not say (PROV-1), and the size bound of
answers and tool results (PROV-5).

A provider that streams no usage (llama.cpp never does; others only when asked with
``stream_options.include_usage``) still ran the model: its prompt is counted as the plan
counted it, its answer with the profile's tokenizer, and the ledger row is marked
``estimated``.  An answer is never recorded as 0 tokens: one that came back empty still cost
the provider its end-of-answer token.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from chatmem.context.values import ToolCall

#: Appended to a tool result cut at the size bound (PROV-5); it counts toward the bound.
TOOL_RESULT_CUT = "\n[… tool result cut at {limit} bytes: it had {size} bytes …]"


def counted_answer(tokenizer: Any, text: str, calls: Sequence[ToolCall] = ()) -> int:
    """Tokens of an answer as the profile's tokenizer counts it: its text and the JSON of
    its tool calls; at least 1."""
    total = tokenizer.count(text) if text else 0
    if calls:
        total += tokenizer.count(
            json.dumps(
                [
                    {
                        "id": c.id,
                        "type": "function",
                        "function": {"name": c.name, "arguments": c.arguments},
                    }
                    for c in calls
                ],
                ensure_ascii=False,
                separators=(",", ":"),
            )
        )
    return max(1, total)


def utf8_size(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


def utf8_prefix(text: str, size: int) -> str:
    """The longest prefix of ``text`` of at most ``size`` UTF-8 bytes (whole characters)."""
    if size <= 0:
        return ""
    return text.encode("utf-8", "surrogatepass")[:size].decode("utf-8", "ignore")


def bound_tool_result(text: str, limit: int) -> tuple[str, bool]:
    """PROV-5: a tool result cut to at most ``limit`` UTF-8 bytes, marker included, and
    whether it was cut.  What is kept is the result's beginning."""
    size = utf8_size(text)
    if size <= limit:
        return text, False
    marker = TOOL_RESULT_CUT.format(limit=limit, size=size)
    return utf8_prefix(text, limit - utf8_size(marker)) + marker, True
