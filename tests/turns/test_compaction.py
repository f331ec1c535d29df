"""Compaction in turns and on demand (CTX-4, CTX-5, CTX-10, CTX-11, CTX-12)."""

from __future__ import annotations

from fastapi.testclient import TestClient
from tests.support.model_server import FakeModelServer
from tests.turns.conftest import Chat, make_chat, seed_pairs, summaries


def _compact(chat: Chat, focus: str | None = None) -> object:
    return chat.client.post(
        f"/api/v1/conversations/{chat.conversation_id}/compact",
        json={"focus": focus} if focus is not None else {},
        headers=chat.headers,
    )


def test_nothing_to_compress_with_fewer_than_two_pairs_CTX_11(chat: Chat) -> None:
    seed_pairs(chat, 1)
    response = _compact(chat)
    assert response.status_code == 409  # type: ignore[attr-defined]
    assert response.json()["error"] == {  # type: ignore[attr-defined]
        "code": "nothing_to_compress",
        "message": "Nothing to compress yet",
    }
    price = chat.client.get(
        f"/api/v1/conversations/{chat.conversation_id}/compact/price", headers=chat.headers
    ).json()
    assert price["available"] is False


def test_manual_compaction_reports_price_and_keeps_last_pair_CTX_11(chat: Chat) -> None:
    seed_pairs(chat, 4)
    price = chat.client.get(
        f"/api/v1/conversations/{chat.conversation_id}/compact/price?focus=numbers",
        headers=chat.headers,
    ).json()
    assert price["available"] is True and price["price"] > 0
    chat.model.reply("Goal: squares. Key facts: 1, 4, 9.", usage=(400, 20))
    response = _compact(chat, "numbers")
    assert response.status_code == 200, response.text  # type: ignore[attr-defined]
    body = response.json()  # type: ignore[attr-defined]
    assert body["summary"] == "Goal: squares. Key facts: 1, 4, 9."
    assert body["message"] == "Memory compressed — 6 earlier messages summarised"
    assert body["price"] == price["price"]
    assert body["focus"] == "numbers"
    summariser_prompt = str(chat.model.chat_requests[-1].messages)
    assert "numbers" in summariser_prompt
    messages = chat.messages()
    assert [s[0] for s in summaries(chat)] == [1]
    assert summaries(chat)[0][2] == messages[5]["id"]  # the last pair stays verbatim
    plan = chat.client.get(
        f"/api/v1/conversations/{chat.conversation_id}/context", headers=chat.headers
    ).json()
    assert [plan["status"][m["id"]] for m in messages] == ["summarized"] * 6 + ["in_memory"] * 2
    # The ledger carries the compaction's cost (USE-1).
    usage = chat.client.get("/api/v1/usage", headers=chat.headers).json()
    assert usage["total"] == (400 * 1.0 + 20 * 2.0) / 1e6
    # The next request sends the summary plus the recent messages.
    chat.model.reply("ok")
    chat.turn("And 5?")
    sent = str(chat.model.chat_requests[-1].messages)
    assert "Goal: squares" in sent and "Question 1:" not in sent and "Question 4:" in sent


def test_failed_compaction_changes_nothing_CTX_12(chat: Chat) -> None:
    seed_pairs(chat, 3)
    before = chat.messages()
    chat.model.error(400, {"error": {"message": "bad request", "type": "invalid_request_error"}})
    response = _compact(chat)
    assert response.status_code >= 400  # type: ignore[attr-defined]
    assert response.json()["error"]["code"] == "provider_error"  # type: ignore[attr-defined]
    assert summaries(chat) == []
    assert chat.messages() == before
    # The lock was released: a retry works.
    chat.model.reply("Summary after retry.")
    assert _compact(chat).status_code == 200  # type: ignore[attr-defined]
    assert [s[1] for s in summaries(chat)] == ["Summary after retry."]


def test_compaction_timeout_changes_nothing_CTX_12(
    turn_client: TestClient, model_server: FakeModelServer
) -> None:
    turn_client.app.state.settings.model_timeout = 0.5  # type: ignore[attr-defined]
    chat = make_chat(turn_client, model_server)
    seed_pairs(chat, 3)
    before = chat.messages()
    model_server.hang(3)
    response = _compact(chat)
    assert response.status_code in (502, 504)  # type: ignore[attr-defined]
    assert summaries(chat) == []
    assert chat.messages() == before


def test_economy_folds_a_full_batch_during_a_turn_and_marks_it_CTX_4_CTX_10(
    turn_client: TestClient, model_server: FakeModelServer
) -> None:
    chat = make_chat(turn_client, model_server, mode="economy")
    seed_pairs(chat, 7)  # K=3 kept verbatim + a full batch of B=4 pairs to fold
    model_server.reply("Summary of pairs 1-4.", usage=(300, 10))
    model_server.reply("The answer.", usage=(100, 5))
    run_id = chat.start("Question 8")
    events = chat.events(run_id)
    compaction = [e["data"] for e in events if e["event"] == "compaction"]
    # one round (progress), then the marker
    assert [d["final"] for d in compaction] == [False, True]
    assert compaction[0]["message"] == "Compressing memory… round 1 of ≈1"
    assert compaction[1]["message"] == "Memory compressed — 8 earlier messages summarised"
    assert (compaction[1]["count"], compaction[1]["total"]) == (8, 8)
    assert events[-1]["event"] == "done"
    answer_request = model_server.chat_requests[-1].messages
    assert any("Summary of pairs 1-4." in str(m["content"]) for m in answer_request)
    assert not any("Question 1:" in str(m["content"]) for m in answer_request)
    run = chat.wait(run_id)
    # CTX-4: the summary's cost is added to the answer on which it was extended.
    assert run["cost"] == (300 * 1.0 + 10 * 2.0 + 100 * 1.0 + 5 * 2.0) / 1e6


def test_full_mode_history_over_the_window_compacts_first_instead_of_refusing_CTX_5_CTX_19(
    turn_client: TestClient, model_server: FakeModelServer
) -> None:
    """A history longer than the window is not a 413: the turn compacts, then answers."""
    from chatmem.store.messages import append_message
    from chatmem.store.tables.conversations import Conversation

    chat = make_chat(
        turn_client, model_server, profile={"context_window": 8192, "answer_reserve": 1024}
    )
    with chat.client.app.state.db.session() as session:  # type: ignore[attr-defined]
        row = session.get(Conversation, chat.conversation_id)
        assert row is not None
        # 60 messages of ≈ 150 tokens: past the window; the last 20 and a summary fit.
        for i in range(30):
            append_message(session, row, "user", f"Question {i}: " + "detail " * 130)
            append_message(session, row, "assistant", f"Answer {i}: " + "detail " * 130)
    plan = chat.client.get(
        f"/api/v1/conversations/{chat.conversation_id}/context", headers=chat.headers
    ).json()
    # CTX-21: it fits after the fold, and the plan says so before sending
    assert plan["fits"] is True and plan["compaction"]["needed"] is True
    assert plan["compaction"]["rounds"] >= 2
    # Every summariser round and the answer get this reply; the fold takes as many rounds
    # as the summariser's own window needs (the backlog is larger than one request).
    model_server.default_reply = "Summary: thirty detailed exchanges."
    run_id = chat.start("And now?")
    events = chat.events(run_id)
    compaction = [e["data"] for e in events if e["event"] == "compaction"]
    rounds = [d for d in compaction if not d["final"]]
    assert len(rounds) >= 2 and compaction[-1]["final"]
    assert [d["round"] for d in rounds] == list(range(1, len(rounds) + 1))
    assert events[-1]["event"] == "done", events
    assert chat.wait(run_id)["status"] == "completed"
    answer_request = model_server.chat_requests[-1].messages
    assert "Summary: thirty detailed exchanges." in str(answer_request[0]["content"])
    assert "Question 0:" not in str(answer_request)
    assert len(summaries(chat)) == len(rounds)
