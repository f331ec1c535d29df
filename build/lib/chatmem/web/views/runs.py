"""The JSON shapes of runs and of recorded tool calls."""

from __future__ import annotations

from typing import Any

from chatmem.store.runs import RunRecord
from chatmem.store.tool_calls import ToolCallRecord
from chatmem.store.types import iso


def run_public(run: RunRecord) -> dict[str, Any]:
    """A run as the API answers it (TURN-1, TURN-6): its state, usage and cost, the call it
    waits on (PROV-6) and who answered (USE-4)."""
    return {
        "id": run.id,
        "conversation_id": run.conversation_id,
        "status": run.status,
        "user_message_id": run.user_message_id,
        "error": (
            {"code": run.error_code, "message": run.error_message} if run.error_code else None
        ),
        "note": run.note,
        "usage": {
            "prompt_tokens": run.prompt_tokens,
            "completion_tokens": run.completion_tokens,
        },
        "cost": round(run.cost, 8),
        "currency": "USD",
        "last_event_id": run.last_seq,
        # PROV-6: the "ask first" tool call the turn waits on (it stays ``running``).
        "waiting": run.waiting if run.status == "running" else None,
        "answered_by": run.answered_by,
        "answered_reason": run.answered_reason,
        "created_at": iso(run.created_at),
        "finished_at": iso(run.finished_at),
    }


def tool_call_public(row: ToolCallRecord, user_name: str | None) -> dict[str, Any]:
    """One recorded call: who (and whether the model or an app called), when, where, what
    (the arguments' digest), how it ended."""
    return {
        "id": row.id,
        "user": {"id": row.user_id, "name": user_name},
        "run_id": row.run_id,
        "conversation_id": row.conversation_id,
        "call_id": row.call_id,
        "server": {"id": row.server_id, "name": row.server_name},
        "tool": row.tool or row.name,
        "name": row.name,
        "arguments_sha256": row.arguments_sha256,
        "status": row.status,
        "decision": (
            {"decision": row.decision, "by": row.decided_by, "at": iso(row.decided_at)}
            if row.decision
            else None
        ),
        "started_at": iso(row.started_at),
        "finished_at": iso(row.finished_at),
        "duration_ms": row.duration_ms,
        # APPS-3: "model" (a turn's call) or "app" (an app's own, for the same user).
        "caller": row.caller,
    }
