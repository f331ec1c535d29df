"""Turns through the HTTP API against the fake model server (TURN-1, TURN-2, TURN-5, TURN-6)."""

from __future__ import annotations

import threading
from typing import Any

from fastapi.testclient import TestClient
from tests.support.model_server import FakeModelServer
from tests.support.runs import finished_run
from tests.turns.conftest import Chat, make_chat

from chatmem.settings import Settings
from chatmem.web.app import create_app


def _finished(chat: Chat, run_id: str) -> dict[str, Any]:
    """The run once it has ended: its own event stream, read to its terminal event."""
    return finished_run(chat.client, run_id, chat.headers)


def _turn(chat: Chat, content: str) -> dict[str, Any]:
    return _finished(chat, chat.start(content))


def test_turn_streams_deltas_then_done_and_stores_the_answer_TURN_1(chat: Chat) -> None:
    chat.model.reply("Hello there, friend!", usage=(120, 7))
    run_id = chat.start("Hi")
    events = chat.events(run_id)
    kinds = [e["event"] for e in events]
    assert kinds[-1] == "done" and "delta" in kinds
    assert [e["id"] for e in events] == list(range(1, len(events) + 1))
    assert (
        "".join(e["data"]["text"] for e in events if e["event"] == "delta")
        == "Hello there, friend!"
    )
    run = chat.run(run_id)  # the events above end with the run's end, stored with it
    assert run["status"] == "completed"
    assert run["usage"] == {"prompt_tokens": 120, "completion_tokens": 7}
    assert run["cost"] == (120 * 1.0 + 7 * 2.0) / 1e6  # USE-1: reported usage × profile prices
    roles = [(m["role"], m["content"]) for m in chat.messages()]
    assert roles == [("user", "Hi"), ("assistant", "Hello there, friend!")]


def test_every_model_request_is_the_engines_plan(chat: Chat) -> None:
    _turn(chat, "First question")
    _turn(chat, "Second question")
    sent = chat.model.chat_requests[-1].messages
    contents = [m["content"] for m in sent if m["role"] in ("user", "assistant")]
    assert contents[-1] == "Second question"
    assert "First question" in contents
    plan = chat.client.get(
        f"/api/v1/conversations/{chat.conversation_id}/context", headers=chat.headers
    ).json()
    assert plan["mode"] == "full"
    assert set(plan["status"]) == {m["id"] for m in chat.messages()}


def test_idempotency_key_answers_the_same_run_TURN_6(chat: Chat) -> None:
    first = chat.submit("Once", **{"Idempotency-Key": "k-1"})
    second = chat.submit("Once", **{"Idempotency-Key": "k-1"})
    assert first.status_code == second.status_code == 202
    assert first.json()["run_id"] == second.json()["run_id"]
    _finished(chat, first.json()["run_id"])
    assert [m["role"] for m in chat.messages()].count("user") == 1
    assert len(chat.model.chat_requests) == 1


def test_one_turn_at_a_time_per_conversation(chat: Chat) -> None:
    chat.model.reply("slow " * 10, delay=0.1)
    run_id = chat.start("Go")
    again = chat.submit("Again")
    assert again.status_code == 409
    assert again.json()["error"]["code"] == "turn_running"
    compact = chat.client.post(
        f"/api/v1/conversations/{chat.conversation_id}/compact", json={}, headers=chat.headers
    )
    assert compact.status_code == 409
    assert compact.json()["error"]["code"] == "compaction_running"
    active = chat.client.get(
        f"/api/v1/conversations/{chat.conversation_id}/runs?active=1", headers=chat.headers
    ).json()["items"]
    assert [r["id"] for r in active] == [run_id]
    _finished(chat, run_id)
    assert chat.submit("Now").status_code == 202


def test_events_resume_after_last_event_id_TURN_6(chat: Chat) -> None:
    chat.model.reply("one two three four five")
    run_id = chat.start("Count")
    everything = chat.events(run_id)
    resumed = chat.events(run_id, after=2)
    assert resumed == everything[2:]
    by_query = chat.client.get(f"/api/v1/runs/{run_id}/events?after=3", headers=chat.headers)
    assert by_query.text.startswith("id: 4\n")


def test_several_watchers_follow_one_live_run(chat: Chat) -> None:
    chat.model.reply("a b c d e f", delay=0.05)
    run_id = chat.start("Watch")
    results: list[list[dict[str, object]]] = []

    def watch() -> None:
        results.append(chat.events(run_id))

    threads = [threading.Thread(target=watch) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(15)
    assert len(results) == 3
    assert results[0] == results[1] == results[2]
    assert results[0][-1]["event"] == "done"


def test_closing_the_watcher_does_not_cancel_the_turn_TURN_1(chat: Chat) -> None:
    chat.model.reply("keep going after the tab closed", delay=0.05)
    run_id = chat.start("Go")
    first = chat.events(run_id, limit=1)
    assert first[0]["event"] == "delta"
    run = _finished(chat, run_id)
    assert run["status"] == "completed"
    assert chat.messages()[-1]["content"] == "keep going after the tab closed"


def test_stop_keeps_the_text_streamed_so_far_TURN_2(chat: Chat) -> None:
    chat.model.reply(" ".join(f"w{i}" for i in range(40)), delay=0.1)
    run_id = chat.start("Long answer please")
    seen = chat.events(run_id, limit=3)
    stopped = chat.client.post(f"/api/v1/runs/{run_id}/stop", headers=chat.headers)
    assert stopped.status_code == 200
    assert stopped.json()["status"] == "stopped"
    kept = chat.messages()[-1]
    assert kept["role"] == "assistant"
    streamed = "".join(e["data"]["text"] for e in seen)
    assert kept["content"].startswith(streamed)
    assert len(kept["content"]) < len(" ".join(f"w{i}" for i in range(40)))
    assert chat.events(run_id)[-1]["data"]["status"] == "stopped"
    # The conversation continues.
    chat.model.reply("Continuing.")
    assert _turn(chat, "Continue")["status"] == "completed"


def test_provider_context_length_error_gives_the_ctx19_message(chat: Chat) -> None:
    chat.model.context_length_error()
    run = _turn(chat, "Hello")
    assert run["status"] == "failed"
    assert run["error"]["code"] == "context_length_exceeded"
    assert "Economy" in run["error"]["message"]
    last = chat.events(run["id"])[-1]
    assert last["event"] == "error" and last["data"]["code"] == "context_length_exceeded"


def test_a_message_too_large_for_the_window_is_refused_TURN_5(
    turn_client: TestClient, model_server: FakeModelServer
) -> None:
    chat = make_chat(
        turn_client, model_server, profile={"context_window": 8192, "answer_reserve": 1024}
    )
    response = chat.submit("word " * 40_000)
    assert response.status_code == 413
    assert response.json()["error"]["code"] == "does_not_fit"
    assert chat.messages() == []
    assert model_server.chat_requests == []


def test_foreign_runs_answer_404_STORE_1(
    turn_client: TestClient, model_server: FakeModelServer
) -> None:
    alice = make_chat(turn_client, model_server, name="alice")
    mallory = make_chat(turn_client, model_server, name="mallory")
    run_id = alice.start("Secret")
    _finished(alice, run_id)
    for method, path in [
        ("GET", f"/api/v1/runs/{run_id}"),
        ("POST", f"/api/v1/runs/{run_id}/stop"),
        ("GET", f"/api/v1/runs/{run_id}/events"),
        ("POST", f"/api/v1/conversations/{alice.conversation_id}/turns"),
        ("GET", f"/api/v1/conversations/{alice.conversation_id}/context"),
        ("POST", f"/api/v1/conversations/{alice.conversation_id}/compact"),
    ]:
        response = turn_client.request(method, path, headers=mallory.headers, json={"content": "x"})
        assert response.status_code == 404, (method, path)
        assert response.json()["error"]["code"] == "not_found"


def test_guard_ends_a_long_turn_with_a_note_and_it_can_continue(
    turn_client: TestClient, model_server: FakeModelServer
) -> None:
    turn_client.app.state.settings.turn_max_iterations = 2  # type: ignore[attr-defined]
    chat = make_chat(turn_client, model_server)
    model_server.tool_call("missing_tool", {"x": 1})
    model_server.tool_call("missing_tool", {"x": 2})
    run = _turn(chat, "Loop forever")
    assert run["status"] == "completed"
    assert "limit" in run["note"]
    messages = chat.messages()
    assert (
        messages[-1]["role"] == "assistant"
        and "Send a message to continue" in messages[-1]["content"]
    )
    # Every tool call has its result (CTX-20), even when the tool is unknown.
    calls = [c["id"] for m in messages for c in (m.get("tool_calls") or [])]
    answered = [m["tool_call_id"] for m in messages if m["role"] == "tool"]
    assert calls == answered
    model_server.reply("Done now.")
    assert _turn(chat, "Continue")["status"] == "completed"


def test_shutdown_mid_turn_interrupts_and_keeps_the_text_TURN_3(
    turn_settings: object, model_server: FakeModelServer
) -> None:
    from chatmem.web.app import create_app

    with TestClient(create_app(turn_settings)) as client:  # type: ignore[arg-type]
        chat = make_chat(client, model_server)
        model_server.reply(" ".join(f"w{i}" for i in range(50)), delay=0.05)
        run_id = chat.start("Long")
        seen = chat.events(run_id, limit=3)
    with TestClient(create_app(turn_settings)) as client:  # type: ignore[arg-type]
        chat.client = client
        run = chat.run(run_id)
        assert run["status"] == "interrupted"
        kept = chat.messages()[-1]
        assert kept["role"] == "assistant"
        assert kept["content"].startswith("".join(e["data"]["text"] for e in seen))
        assert chat.events(run_id)[-1]["data"]["code"] == "interrupted"


def test_a_conversation_without_a_model_is_refused_before_storing(chat: Chat) -> None:
    chat.set(profile_id=None)
    response = chat.submit("Hello?")
    assert response.status_code == 422
    assert response.json()["error"]["code"] == "invalid_input"
    assert chat.messages() == []


def test_turns_keep_the_message_quota_STORE_4(
    turn_settings: Settings, model_server: FakeModelServer
) -> None:
    """A turn's question and answer are stored through the same quota as any message: the
    oldest go, and the owner's eviction counter says how many."""
    with TestClient(create_app(turn_settings.model_copy(update={"max_messages": 3}))) as client:
        chat = make_chat(client, model_server)
        model_server.reply("first answer")
        assert _turn(chat, "first question")["status"] == "completed"
        model_server.reply("second answer")
        assert _turn(chat, "second question")["status"] == "completed"
        assert [m["content"] for m in chat.messages()] == [
            "first answer",
            "second question",
            "second answer",
        ]
        me = client.get("/api/v1/me", headers=chat.headers).json()
        assert me["evicted"]["messages"] == 1
