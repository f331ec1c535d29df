"""The JSON of stored messages and summary versions: the count shown is the column of the
tokenizer the caller names (the profile's, CTX-1), the status the plan's (CTX-14)."""

from __future__ import annotations

from typing import Any

from chatmem.context.values import Fact
from chatmem.store.fact_records import FactRecord, read_record
from chatmem.store.messages import MessageRecord
from chatmem.store.summaries import SummaryRecord, is_edited
from chatmem.store.types import iso


def message_public(
    message: MessageRecord, tokens_column: str, status: str | None
) -> dict[str, Any]:
    return {
        "id": message.id,
        "seq": message.seq,
        "role": message.role,
        "content": message.content,
        "created_at": iso(message.created_at),
        "tokens": getattr(message, tokens_column),
        "excluded": message.excluded,
        "tool_calls": message.tool_calls or [],
        "tool_call_id": message.tool_call_id,
        "status": status,
        # USE-4: the profile that answered (with the feed's note when it is not the chosen).
        "answered_by": (message.meta or {}).get("answered_by"),
        # What a reasoning model thought before this answer (shown, never sent back).
        "reasoning": (message.meta or {}).get("reasoning"),
        # An answer cut short: "length" (the model's output limit), "content_filter".
        "finish_reason": (message.meta or {}).get("finish_reason"),
        # APPS-3: a question an app sent (``ui/message``): {"tool_call_id", "tool"}.
        "from_app": (message.meta or {}).get("from_app"),
    }


def summary_public(summary: SummaryRecord, tokens_column: str) -> dict[str, Any]:
    """A summary version (a record, or the loader's row of the same columns)."""
    facts = summary.facts
    if not isinstance(facts, FactRecord):
        facts = read_record(facts)
    return {
        "id": summary.id,
        "version": summary.version,
        "text": summary.text,
        "first_message_id": summary.first_message_id,
        "through": summary.through_message_id,
        "message_count": summary.message_count,
        "focus": summary.focus,
        "cost": summary.cost,
        "tokens": getattr(summary, tokens_column),
        "created_at": iso(summary.created_at),
        "edited": is_edited(summary),  # CTX-23: a version the user wrote
        # CTX-24: the fact guard's record (the kept section's facts, what the cap left out).
        "facts_kept": [fact_public(f) for f in facts.kept],
        "facts_dropped": [fact_public(f) for f in facts.dropped],
        "facts_dropped_count": facts.dropped_count,
    }


def fact_public(fact: Fact) -> dict[str, Any]:
    return {
        "text": fact.text,
        "message_id": fact.message_id,
        "date": fact.at.date().isoformat() if fact.at is not None else None,
        "kind": fact.kind,
    }
