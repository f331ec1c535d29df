"""What a model call cost when the provider did not say (PROV-1).  (The size bound of tool
results, PROV-5, is :func:`chatmem.tools.results.bound_tool_result`.)

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
