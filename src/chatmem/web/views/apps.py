"""The JSON of MCP Apps (APPS-1 … APPS-4): where a call's app is, what an app is given."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from chatmem.store.tool_calls import CallApp


def tool_calls_public(
    message_id: str,
    calls: Sequence[Mapping[str, Any]],
    apps: Mapping[tuple[str | None, str], CallApp],
) -> list[dict[str, Any]]:
    """An assistant message's tool calls, each with its record (``tool_call_id``: None for a
    call chatmem did not make — a client's own tool) and its app (APPS-1: ``{"resource_uri"}``,
    None when the tool has none or its server shows no apps)."""
    out: list[dict[str, Any]] = []
    for call in calls:
        found = apps.get((message_id, str(call.get("id"))))
        app = {"resource_uri": found.app_uri} if found is not None and found.app_uri else None
        out.append({**call, "tool_call_id": found.id if found is not None else None, "app": app})
    return out
