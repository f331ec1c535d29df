"""Run events' wire form (TURN-6): each event type's ``data`` object, key for key and in
order, as stored, published and streamed — and read back to the same event."""

from __future__ import annotations

import json
from typing import Any, get_args

import pytest

from chatmem.turns import events
from chatmem.turns.events import RunEvent

ANSWERED = {"profile_id": "p1", "name": "Fallback", "reason": "included_used_up"}
FILES = [{"id": "f1", "name": "shot.png", "mime": "image/png", "size": 3}]

#: Every event type (and every optional key, present and absent) with the data it is sent as.
WIRE: list[tuple[RunEvent, str, dict[str, Any]]] = [
    (events.Delta(1, "héllo", 0), "delta", {"text": "héllo", "step": 0}),
    (events.Reasoning(2, "hmm", 1), "reasoning", {"text": "hmm", "step": 1}),
    (
        events.ToolCall(3, "c1", "search", '{"q":"x"}', "m1", "files"),
        "tool_call",
        {
            "id": "c1",
            "name": "search",
            "arguments": '{"q":"x"}',
            "message_id": "m1",
            "server": "files",
            "tool_call_id": None,
            "app": None,
        },
    ),
    (
        # APPS-1: the call's record and its app.
        events.ToolCall(
            3, "c1", "weather", "{}", "m1", "w", tool_call_id="r1", app={"resource_uri": "ui://w"}
        ),
        "tool_call",
        {
            "id": "c1",
            "name": "weather",
            "arguments": "{}",
            "message_id": "m1",
            "server": "w",
            "tool_call_id": "r1",
            "app": {"resource_uri": "ui://w"},
        },
    ),
    (
        events.ToolCall(4, "c2", "mine", "{}", None, None, client=True),
        "tool_call",
        {
            "id": "c2",
            "name": "mine",
            "arguments": "{}",
            "message_id": None,
            "server": None,
            "tool_call_id": None,
            "app": None,
            "client": True,
        },
    ),
    (
        events.Approval(5, "c1", "search", "{}", "files", "search", "waiting"),
        "approval",
        {
            "tool_call_id": "c1",
            "name": "search",
            "arguments": "{}",
            "server": "files",
            "tool": "search",
            "status": "waiting",
        },
    ),
    (
        events.ToolResult(6, "c1", "search", "found", "completed", "m2"),
        "tool_result",
        {
            "id": "c1",
            "name": "search",
            "content": "found",
            "status": "completed",
            "message_id": "m2",
            "tool_call_id": None,
            "app": None,
        },
    ),
    (
        events.ToolResult(
            7,
            "c1",
            "shot",
            "an image",
            "completed",
            "m3",
            tuple(FILES),
            "r7",
            {"resource_uri": "ui://s"},
        ),
        "tool_result",
        {
            "id": "c1",
            "name": "shot",
            "content": "an image",
            "status": "completed",
            "message_id": "m3",
            "tool_call_id": "r7",
            "app": {"resource_uri": "ui://s"},
            "files": FILES,
        },
    ),
    (
        events.Compaction(8, "Compressing memory… round 1 of ≈2", 0, 0, 1, 2, False, (1, 3)),
        "compaction",
        {
            "message": "Compressing memory… round 1 of ≈2",
            "count": 0,
            "total": 0,
            "round": 1,
            "rounds": 2,
            "final": False,
            "piece": [1, 3],
        },
    ),
    (
        events.Compaction(
            9, "round 2", 4, 4, 2, 2, False, None, summary_id="s1", summary_version=1, through="m9"
        ),
        "compaction",
        {
            "message": "round 2",
            "count": 4,
            "total": 4,
            "round": 2,
            "rounds": 2,
            "final": False,
            "summary_id": "s1",
            "summary_version": 1,
            "through": "m9",
        },
    ),
    (
        events.Compaction(
            10, "done", 4, 6, 2, 2, True, summary_id="s1", summary_version=2, through="m9", cost=0.5
        ),
        "compaction",
        {
            "message": "done",
            "count": 4,
            "total": 6,
            "round": 2,
            "rounds": 2,
            "final": True,
            "summary_id": "s1",
            "summary_version": 2,
            "through": "m9",
            "cost": 0.5,
        },
    ),
    (
        events.Done(
            11,
            "completed",
            "m4",
            None,
            {"prompt_tokens": 3, "completion_tokens": 2},
            0.00012345,
            ANSWERED,
            "length",
        ),
        "done",
        {
            "status": "completed",
            "message_id": "m4",
            "note": None,
            "usage": {"prompt_tokens": 3, "completion_tokens": 2},
            "cost": 0.00012345,
            "answered_by": ANSWERED,
            "finish_reason": "length",
        },
    ),
    (
        events.Error(12, "interrupted", "The server restarted."),
        "error",
        {"code": "interrupted", "message": "The server restarted."},
    ),
]


@pytest.mark.parametrize(("event", "type_", "data"), WIRE, ids=lambda v: getattr(v, "type", ""))
def test_each_event_has_its_wire_form_and_reads_back(
    event: RunEvent, type_: str, data: dict[str, Any]
) -> None:
    assert event.type == type_
    assert list(event.data.items()) == list(data.items())  # the same keys, in the same order
    assert event.terminal == (type_ in ("done", "error"))
    # Stored (a JSON column) and read back; published on the live log and read back.
    assert events.from_stored(event.seq, type_, json.loads(json.dumps(event.data))) == event
    assert events.from_json(events.to_json(event)) == event
    assert events.to_json(event) == json.dumps(
        {"seq": event.seq, "type": type_, "data": data}, ensure_ascii=False
    )
    payload = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    assert events.sse(event) == f"id: {event.seq}\nevent: {type_}\ndata: {payload}\n\n"


def test_every_event_type_is_covered() -> None:
    assert {type(event) for event, _, _ in WIRE} == set(get_args(RunEvent))


def test_a_type_that_is_no_run_events_is_refused() -> None:
    with pytest.raises(ValueError, match="not a run event type"):
        events.from_stored(1, "telemetry", {})
