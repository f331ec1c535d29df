"""TURN-1: ``POST …/turns`` with ``Accept: text/event-stream`` streams the run's events in its
own response — one request to the first token — and the run stays the server's."""

from __future__ import annotations

from typing import Any

from tests.turns.conftest import Chat, parse_sse


def _stream_turn(chat: Chat, content: str) -> tuple[int, str, str, list[dict[str, Any]]]:
    with chat.client.stream(
        "POST",
        f"/api/v1/conversations/{chat.conversation_id}/turns",
        json={"content": content},
        headers={**chat.headers, "Accept": "text/event-stream"},
    ) as response:
        events = list(parse_sse(response.iter_lines()))
        return (
            response.status_code,
            response.headers.get("content-type", ""),
            response.headers.get("x-chatmem-run-id", ""),
            events,
        )


def test_a_turn_streams_its_events_in_its_own_response_TURN_1(chat: Chat) -> None:
    chat.model.reply("Hello there, friend.")
    status, kind, run_id, events = _stream_turn(chat, "Hi")
    assert status == 200 and kind.startswith("text/event-stream")
    assert [e["id"] for e in events] == list(range(1, len(events) + 1))
    assert events[-1]["event"] == "done"
    assert "".join(e["data"]["text"] for e in events if e["event"] == "delta") == (
        "Hello there, friend."
    )
    # The same run, followed the usual way, replays the same events.
    assert chat.run(run_id)["status"] == "completed"
    assert [e["id"] for e in chat.events(run_id)] == [e["id"] for e in events]
    assert [m["content"] for m in chat.messages()][-2:] == ["Hi", "Hello there, friend."]


def test_without_the_accept_header_a_turn_still_answers_202(chat: Chat) -> None:
    chat.model.reply("Fine.")
    response = chat.submit("Plain")
    assert response.status_code == 202 and response.json()["created"] is True
    assert chat.events(response.json()["run_id"])[-1]["event"] == "done"


def test_a_refused_streamed_turn_answers_its_error_not_a_stream(chat: Chat) -> None:
    status, kind, _, _ = _stream_turn(chat, "   ")
    assert status == 422 and not kind.startswith("text/event-stream")
