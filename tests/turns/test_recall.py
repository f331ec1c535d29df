"""Recall (issue 17): the model looks up what left its memory, verbatim, in this conversation
only (CTX-8), within a token bound; a switch per conversation and per profile."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient
from tests.support.model_server import FakeModelServer
from tests.turns.conftest import Chat, make_chat

from chatmem.context import get_tokenizer
from chatmem.context.recall import ELLIPSIS, MAX_RESULT_TOKENS, RECALL_TOOL

FACT = "Let me confirm: the budget we agreed is 48,250 euros, paid in two parts."
VERBATIM = "the budget we agreed is 48,250 euros"


def _seed(chat: Chat, pairs: int, special: dict[int, str] | None = None) -> list[str]:
    """``pairs`` question–answer pairs stored directly; ``special`` replaces the content of
    the messages at those (1-based) positions.  Returns the message ids in order."""
    from chatmem.store.messages import append_message
    from chatmem.store.tables.conversations import Conversation

    special = special or {}
    ids: list[str] = []
    with chat.client.app.state.db.session() as session:  # type: ignore[attr-defined]
        row = session.get(Conversation, chat.conversation_id)
        assert row is not None
        for i in range(1, pairs + 1):
            for role, text in (
                ("user", f"Question {i}: what should we pack for day {i} of the trip?"),
                ("assistant", f"Answer {i}: for day {i} take water, a map and some snacks."),
            ):
                content = special.get(len(ids) + 1, text)
                ids.append(append_message(session, row, role, content).id)
    return ids


def _compact(chat: Chat, summary: str) -> None:
    chat.model.reply(summary)
    response = chat.client.post(
        f"/api/v1/conversations/{chat.conversation_id}/compact", json={}, headers=chat.headers
    )
    assert response.status_code == 200, response.text


def _plan(chat: Chat) -> dict[str, Any]:
    response = chat.client.get(
        f"/api/v1/conversations/{chat.conversation_id}/context", headers=chat.headers
    )
    assert response.status_code == 200, response.text
    return dict(response.json())


def _recall_turn(chat: Chat, query: str, question: str, **args: Any) -> dict[str, Any]:
    """One turn in which the model calls recall, then answers; the tool_result event."""
    chat.model.tool_call(RECALL_TOOL, {"query": query, **args}, id="call_recall")
    chat.model.reply("Done.")
    run_id = chat.start(question)
    events = chat.events(run_id)
    assert events[-1]["event"] == "done", events
    call = next(e["data"] for e in events if e["event"] == "tool_call")
    assert call["name"] == RECALL_TOOL and call["server"] is None
    return dict(next(e["data"] for e in events if e["event"] == "tool_result"))


def _offered(request: Any) -> set[str]:
    return {t["function"]["name"] for t in (request.body or {}).get("tools") or []}


def test_recall_brings_back_a_summarised_fact_verbatim(
    turn_client: TestClient, model_server: FakeModelServer
) -> None:
    chat = make_chat(turn_client, model_server, mode="economy")
    ids = _seed(chat, 100, {3: FACT})  # message 3 of 200
    _compact(chat, "Goal: plan a trip. Key facts: a budget was agreed; packing per day.")
    plan = _plan(chat)
    assert plan["status"][ids[2]] == "summarized"
    assert VERBATIM not in str(plan["messages"])

    result = _recall_turn(chat, "agreed budget", "What exact budget did we agree on?")
    assert result["status"] == "completed"
    assert VERBATIM in result["content"]
    assert ids[2] in result["content"]  # the message id, with its time
    assert " UTC" in result["content"]

    first, final = model_server.chat_requests[-2:]
    assert RECALL_TOOL in _offered(first)  # on by default in economy
    assert VERBATIM not in str(first.messages)
    # The final request holds the verbatim sentence, as the recall's tool result.
    tool_messages = [m for m in final.messages if m["role"] == "tool"]
    assert tool_messages and VERBATIM in tool_messages[-1]["content"]
    # Stored like an MCP tool call: the assistant's call, the tool message, the record.
    history = chat.messages()
    assert history[-1]["content"] == "Done."
    assert history[-2]["role"] == "tool" and history[-2]["meta"]["tool"] == RECALL_TOOL
    assert VERBATIM in history[-2]["content"]
    from sqlalchemy import select

    from chatmem.store.tables.runs import ToolCallRow

    with chat.client.app.state.db.session() as session:  # type: ignore[attr-defined]
        row = session.scalars(
            select(ToolCallRow).where(ToolCallRow.conversation_id == chat.conversation_id)
        ).one()
        assert (row.name, row.status, row.server_id) == (RECALL_TOOL, "completed", None)


def test_recall_never_returns_another_conversation_or_what_is_in_memory_CTX_8(
    turn_client: TestClient, model_server: FakeModelServer
) -> None:
    chat = make_chat(turn_client, model_server, mode="economy")
    # The same user's other conversation holds the very words, summarised too.
    other = chat.client.post(
        "/api/v1/conversations",
        json={"title": "other", "mode": "economy", "profile_id": chat.profile_id},
        headers=chat.headers,
    ).json()["id"]
    other_chat = Chat(chat.client, chat.user, chat.model, chat.profile_id, other)
    _seed(other_chat, 10, {3: "Elsewhere: the budget we agreed is 99,999 euros."})
    _compact(other_chat, "Another trip.")

    ids = _seed(chat, 10, {19: "Right now: the budget we agreed is 12,000 euros."})
    _compact(chat, "A trip.")  # message 19 is in the last pair: kept verbatim, in memory
    assert _plan(chat)["status"][ids[18]] == "in_memory"

    result = _recall_turn(chat, "budget agreed euros", "Which budget?")
    assert "99,999" not in result["content"] and "12,000" not in result["content"]
    assert result["content"].startswith("No earlier message")
    assert "99,999" not in str(model_server.chat_requests[-1].messages)


def test_recall_returns_excluded_messages_and_not_its_own_earlier_results(
    turn_client: TestClient, model_server: FakeModelServer
) -> None:
    chat = make_chat(turn_client, model_server, mode="full")
    ids = _seed(chat, 3, {1: FACT})
    response = chat.client.put(
        f"/api/v1/conversations/{chat.conversation_id}/messages/{ids[0]}/exclusion",
        headers=chat.headers,
    )
    assert response.status_code in (200, 204), response.text
    assert _plan(chat)["status"][ids[0]] == "excluded"
    first = _recall_turn(chat, "budget", "The budget?")
    assert VERBATIM in first["content"] and ids[0] in first["content"]
    # A second look-up finds the message again, never the copy in the first result.
    second = _recall_turn(chat, "budget", "The budget, once more?")
    assert second["content"].count(VERBATIM) == 1


def test_recall_switches_offer_the_tool_and_count_it_in_the_tools_row(
    turn_client: TestClient, model_server: FakeModelServer
) -> None:
    chat = make_chat(turn_client, model_server, mode="full")
    conversation = f"/api/v1/conversations/{chat.conversation_id}"
    profile = f"/api/v1/profiles/{chat.profile_id}"
    assert chat.client.get(conversation, headers=chat.headers).json()["recall"] is None
    assert chat.client.get(profile, headers=chat.headers).json()["recall"] is None
    before = _plan(chat)["tokens"]
    with_recall = before["tools"]
    assert with_recall > 0  # on by default in full: its schema costs tokens

    response = chat.client.patch(conversation, json={"recall": False}, headers=chat.headers)
    assert response.status_code == 200 and response.json()["recall"] is False
    after = _plan(chat)["tokens"]
    assert after["tools"] == 0 and after["used"] == before["used"] - with_recall
    chat.model.reply("No tools here.")
    chat.turn("Hello")
    assert RECALL_TOOL not in _offered(model_server.chat_requests[-1])

    # null follows the profile again; the profile's false turns it off, the
    # conversation's true wins over it.
    response = chat.client.patch(conversation, json={"recall": None}, headers=chat.headers)
    assert response.json()["recall"] is None
    assert _plan(chat)["tokens"]["tools"] == with_recall
    response = chat.client.patch(profile, json={"recall": False}, headers=chat.headers)
    assert response.status_code == 200 and response.json()["recall"] is False
    assert _plan(chat)["tokens"]["tools"] == 0
    chat.set(recall=True)
    assert _plan(chat)["tokens"]["tools"] == with_recall
    chat.model.reply("With recall.")
    chat.turn("Hello again")
    assert RECALL_TOOL in _offered(model_server.chat_requests[-1])

    # Off by default in the modes that keep no summary.
    chat.set(recall=None, mode="window")
    response = chat.client.patch(profile, json={"recall": None}, headers=chat.headers)
    assert response.json()["recall"] is None
    assert _plan(chat)["tokens"]["tools"] == 0
    bad = chat.client.patch(conversation, json={"recall": "yes"}, headers=chat.headers)
    assert bad.status_code in (400, 422)


def test_recall_result_is_bounded_in_tokens_and_marks_its_cuts(
    turn_client: TestClient, model_server: FakeModelServer
) -> None:
    chat = make_chat(turn_client, model_server, mode="economy")
    long = " ".join(
        f"Sentence {k} is filler about the weather and the road on day {k}." for k in range(300)
    )
    special = {n: f"{long} The budget line {n} says 48,250 euros. {long}" for n in range(1, 41, 2)}
    _seed(chat, 21, special)
    _compact(chat, "A long trip.")
    result = _recall_turn(chat, "budget euros", "Budget lines?", limit=20)
    content = result["content"]
    tokens = get_tokenizer("estimate").count(content)
    assert tokens <= MAX_RESULT_TOKENS, tokens
    assert ELLIPSIS in content and "48,250 euros" in content
    assert content.count("[message ") >= 2


def test_a_hidden_version_is_never_recalled(
    turn_client: TestClient, model_server: FakeModelServer
) -> None:
    """PROJ-3: a regenerated answer's earlier version is kept but never sent — nor recalled."""
    chat = make_chat(turn_client, model_server, mode="economy")
    chat.model.reply(FACT)
    chat.turn("Which budget?")
    answer = chat.messages()[-1]
    assert answer["content"] == FACT
    chat.model.reply("I do not remember any figure.")
    response = chat.client.post(
        f"/api/v1/conversations/{chat.conversation_id}/messages/{answer['id']}/regenerate",
        headers=chat.headers,
    )
    assert response.status_code == 202, response.text
    assert chat.wait(response.json()["run_id"])["status"] == "completed"
    _seed(chat, 4)
    _compact(chat, "Trip planning.")
    result = _recall_turn(chat, "budget agreed euros", "The budget?")
    assert VERBATIM not in result["content"]


def test_the_recall_switch_survives_export_and_import_STORE_5(
    turn_client: TestClient, model_server: FakeModelServer
) -> None:
    chat = make_chat(turn_client, model_server, mode="full")
    chat.set(recall=False)
    data = chat.client.get(
        "/api/v1/export", params={"conversation_id": chat.conversation_id}, headers=chat.headers
    ).json()
    assert data["conversations"][0]["recall"] is False
    data["conversations"][0]["id"] = "copy"
    response = chat.client.post("/api/v1/import", json=data, headers=chat.headers)
    assert response.status_code == 200, response.text
    listed = chat.client.get("/api/v1/conversations", headers=chat.headers).json()["items"]
    assert sorted(c["recall"] for c in listed if c["recall"] is not None) == [False, False]
    data["conversations"][0].update(id="bad", recall="yes")
    bad = chat.client.post("/api/v1/import", json=data, headers=chat.headers)
    assert bad.status_code in (400, 422)
