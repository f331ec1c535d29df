"""Memory never gets stuck (CTX-21), replayed through the HTTP API as issue 10 reported it.

Each test drives a fresh server with the fake OpenAI-compatible model and checks what a user
would: the turns complete, every request the model received is within its window (counted
with chatmem's conservative estimate), and the plan shown before sending agrees with the
admission.
"""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
from fastapi.testclient import TestClient
from tests.support.model_server import FakeModelServer
from tests.turns.conftest import Chat, make_chat, summaries

from chatmem.context import get_tokenizer
from chatmem.context.compaction import SUMMARY_INSTRUCTIONS
from chatmem.context.fact_guard import strip_kept
from chatmem.context.tokens import MESSAGE_OVERHEAD

ESTIMATE = get_tokenizer("estimate")
WORDS = [
    "the",
    "budget",
    "for",
    "the",
    "kitchen",
    "is",
    "12,500",
    "euros",
    "and",
    "the",
    "tiles",
    "are",
    "grey",
    "oak",
]


def text_of(tokens: int, seed: int = 0) -> str:
    """Ordinary prose of about ``tokens`` tokens (by chatmem's estimate)."""
    rng = random.Random(seed)
    words: list[str] = []
    while ESTIMATE.count(" ".join(words)) < tokens:
        words.extend(rng.choice(WORDS) for _ in range(20))
    return " ".join(words)


def request_tokens(messages: list[dict[str, Any]]) -> int:
    return sum(MESSAGE_OVERHEAD + ESTIMATE.count(str(m.get("content") or "")) for m in messages)


def is_summariser(messages: list[dict[str, Any]]) -> bool:
    return any(SUMMARY_INSTRUCTIONS in str(m.get("content")) for m in messages)


def assert_within_window(model: FakeModelServer, window: int, reserve: int) -> None:
    """CTX-21: every request sent is within the window, the answer's room included."""
    for request in model.chat_requests:
        messages = request.messages
        if is_summariser(messages):
            answer = int(request.body.get("max_tokens") or 0)
            assert answer > 0, "a summariser round must bound its answer"
        else:
            answer = reserve
        assert request_tokens(messages) + answer <= window, (request_tokens(messages), answer)


def plan_of(chat: Chat, draft: str | None = None) -> dict[str, Any]:
    params = {"draft": draft} if draft is not None else {}
    response = chat.client.get(
        f"/api/v1/conversations/{chat.conversation_id}/context", params=params, headers=chat.headers
    )
    assert response.status_code == 200, response.text
    return dict(response.json())


def new_profile(chat: Chat, **fields: Any) -> str:
    body = {
        "name": f"fake {len(fields)}-{fields.get('context_window')}",
        "base_url": chat.model.base_url,
        "model": "fake-model",
        "api_key": "sk-test",
        "input_price_per_mtok": 1.0,
        "output_price_per_mtok": 2.0,
        **fields,
    }
    response = chat.client.post("/api/v1/profiles", json=body, headers=chat.headers)
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


@pytest.mark.parametrize("mode", ["full", "economy"])
def test_a_small_window_with_large_messages_keeps_answering(
    turn_client: TestClient, model_server: FakeModelServer, mode: str
) -> None:
    """Issue 10: 8,192 window, messages of ~1,300 tokens: the 4th was refused."""
    chat = make_chat(turn_client, model_server, mode=mode, profile={"context_window": 8192})
    profile = chat.client.get(f"/api/v1/profiles/{chat.profile_id}", headers=chat.headers).json()
    reserve = profile.get("answer_reserve", 1024)
    assert reserve <= 1024  # CTX-22: the default leaves an 8K model usable
    model_server.default_reply = text_of(1_300, seed=99)
    for i in range(8):
        question = text_of(1_300, seed=i)
        plan = plan_of(chat, question)
        assert plan["fits"] is True, plan["tokens"]
        run = chat.wait(chat.start(question), timeout=60)
        assert run["status"] == "completed", run
    assert_within_window(model_server, 8192, reserve)
    assert summaries(chat), "the early pairs were folded"
    plan = plan_of(chat)
    assert set(plan["status"]) == {m["id"] for m in chat.messages()}


def import_history(chat: Chat, count: int, *, seed: int) -> None:
    """Imports a conversation of ``count`` messages of ~60 words, and makes it the chat's."""
    rng = random.Random(seed)
    messages = [
        {
            "id": f"m{i}",
            "role": "user" if i % 2 == 0 else "assistant",
            "content": " ".join(rng.choice(WORDS) for _ in range(60)) + f" (note {i})",
        }
        for i in range(count)
    ]
    document = {
        "format": "chatmem.export/1",
        "conversations": [{"id": "c1", "title": "Imported", "mode": "full", "messages": messages}],
    }
    response = chat.client.post(
        "/api/v1/import",
        content=json.dumps(document),
        headers={**chat.headers, "Content-Type": "application/json"},
    )
    assert response.status_code == 200, response.text
    listed = chat.client.get("/api/v1/conversations?q=Imported", headers=chat.headers).json()
    chat.conversation_id = listed["items"][0]["id"]
    chat.set(profile_id=chat.profile_id, mode="full")


def test_a_long_imported_history_folds_in_as_many_rounds_as_it_needs(
    turn_client: TestClient, model_server: FakeModelServer
) -> None:
    """Issue 10: 600 imported messages of ~60 words in full mode on 32K ended ``failed``
    after four compaction events."""
    chat = make_chat(turn_client, model_server, profile={"context_window": 32768})
    import_history(chat, 600, seed=3)

    plan = plan_of(chat, "What did we decide?")
    assert plan["fits"] is True and plan["compaction"]["needed"] is True
    assert plan["compaction"]["rounds"] > 1
    assert plan["price"]["compaction"] > 0  # the whole fold is priced before sending
    summarised = [k for k, v in plan["status"].items() if v == "summarized"]
    assert len(summarised) == plan["compaction"]["covered"]

    model_server.default_reply = "## Goal\nA kitchen. ## Key facts\n12,500 euros, grey oak."
    run_id = chat.start("What did we decide?")
    events = chat.events(run_id)
    assert events[-1]["event"] == "done", events[-3:]
    compaction = [e["data"] for e in events if e["event"] == "compaction"]
    rounds = [d for d in compaction if not d["final"]]
    assert len(rounds) >= 2  # more than one summariser window's worth
    assert compaction[-1]["final"] and compaction[-1]["total"] == plan["compaction"]["covered"]
    assert compaction[-1]["message"].startswith(
        f"Memory compressed — {plan['compaction']['covered']} earlier"
    )
    assert_within_window(model_server, 32768, 4096)
    stored = summaries(chat)
    assert len(stored) == len(rounds)  # each round stored as it came (CTX-12)
    assert len(chat.messages()) == 602  # nothing of the history was dropped


def test_a_ten_thousand_message_backlog_folds(
    turn_client: TestClient, model_server: FakeModelServer
) -> None:
    chat = make_chat(turn_client, model_server, profile={"context_window": 32768})
    import_history(chat, 10_000, seed=5)
    plan = plan_of(chat, "And now?")
    assert plan["fits"] is True and plan["compaction"]["rounds"] >= 20
    model_server.default_reply = "## Goal\nA kitchen."
    run = chat.wait(chat.start("And now?"), timeout=120)
    assert run["status"] == "completed", run
    assert_within_window(model_server, 32768, 4096)
    assert len(summaries(chat)) >= 20


@pytest.mark.parametrize("mode", ["full", "economy"])
def test_switching_to_a_smaller_model_never_leaves_the_chat_refusing(
    turn_client: TestClient, model_server: FakeModelServer, mode: str
) -> None:
    """Issue 10: a 40,000-character message on a 32K model, then an 8K model: every message
    was refused, Compress now too, and the counter said muted."""
    chat = make_chat(turn_client, model_server, mode=mode, profile={"context_window": 32768})
    long_text = text_of(14_500, seed=7)  # digits count one token each (CTX-1)
    assert len(long_text) >= 40_000
    assert chat.turn(long_text)["status"] == "completed"
    small = new_profile(chat, context_window=8192)
    chat.set(profile_id=small)

    plan = plan_of(chat, "short q")
    # the plan, the counter and the admission agree: it fits after the fold
    assert plan["fits"] is True and plan["compaction"]["needed"] is True
    assert plan["status"][chat.messages()[0]["id"]] == "summarized"
    assert plan["tokens"]["used"] + plan["tokens"]["reserve"] <= 8192
    model_server.reset()
    model_server.default_reply = "## Goal\nRead a long text."
    run_id = chat.start("short q")
    events = chat.events(run_id)
    assert events[-1]["event"] == "done", events[-3:]
    pieces = [e["data"] for e in events if e["event"] == "compaction" and "piece" in e["data"]]
    assert len(pieces) >= 2  # the long message was summarised in pieces
    assert_within_window(model_server, 8192, plan["tokens"]["reserve"])
    assert chat.turn("another short q")["status"] == "completed"


def test_compress_now_folds_what_the_smaller_model_needs(
    turn_client: TestClient, model_server: FakeModelServer
) -> None:
    chat = make_chat(turn_client, model_server, profile={"context_window": 32768})
    assert chat.turn(text_of(13_000, seed=8))["status"] == "completed"
    chat.set(profile_id=new_profile(chat, context_window=8192))
    price = chat.client.get(
        f"/api/v1/conversations/{chat.conversation_id}/compact/price", headers=chat.headers
    ).json()
    assert price["available"] is True and price["price"] > 0
    model_server.default_reply = "## Goal\nRead a long text."
    response = chat.client.post(
        f"/api/v1/conversations/{chat.conversation_id}/compact", json={}, headers=chat.headers
    )
    assert response.status_code == 200, response.text
    assert response.json()["total"] == 2
    plan = plan_of(chat, "short q")
    assert plan["fits"] is True and plan["compaction"]["needed"] is False
    assert plan["level"] == "muted"


def test_a_message_larger_than_the_window_is_refused_and_the_plan_says_so(
    turn_client: TestClient, model_server: FakeModelServer
) -> None:
    """CTX-19/CTX-21: refused with needed > available, and the plan shown before agrees."""
    chat = make_chat(turn_client, model_server, profile={"context_window": 8192})
    chat.turn("hello")
    huge = text_of(9_000, seed=1)
    plan = plan_of(chat, huge)
    assert plan["fits"] is False and plan["level"] == "red"
    assert plan["compaction"]["needed"] is False  # no fold would make room
    before = chat.messages()
    response = chat.submit(huge)
    assert response.status_code == 413
    error = response.json()["error"]
    assert error["code"] == "does_not_fit"
    assert error["needed"] > error["available"] == 8192
    assert error["needed"] == plan["tokens"]["used"] + plan["tokens"]["reserve"]
    assert chat.messages() == before  # nothing stored


def test_a_stored_message_larger_than_the_window_is_folded_not_counted_as_zero(
    turn_client: TestClient, model_server: FakeModelServer
) -> None:
    """Issue 10: a conversation whose only message is larger than the window planned
    ``used: 0, level: muted, fits: false``."""
    from chatmem.store.messages import append_message
    from chatmem.store.tables.conversations import Conversation

    chat = make_chat(turn_client, model_server, profile={"context_window": 8192})
    with chat.client.app.state.db.session() as session:  # type: ignore[attr-defined]
        row = session.get(Conversation, chat.conversation_id)
        assert row is not None
        append_message(session, row, "user", text_of(12_000, seed=2))
    plan = plan_of(chat)
    assert plan["fits"] is True and plan["compaction"]["needed"] is True
    assert plan["tokens"]["used"] > 0 and plan["tokens"]["summary"] > 0
    model_server.default_reply = "## Goal\nA long text."
    assert chat.turn("What was it about?")["status"] == "completed"
    assert_within_window(model_server, 8192, plan["tokens"]["reserve"])


def test_a_fold_that_fails_midway_keeps_the_rounds_before_and_the_next_turn_goes_on(
    turn_client: TestClient, model_server: FakeModelServer
) -> None:
    """CTX-12 per round: a summariser error at round 2 leaves round 1's summary (consistent
    with the history, which is whole); the next turn folds on from there."""
    chat = make_chat(turn_client, model_server, profile={"context_window": 8192})
    import_history(chat, 300, seed=9)
    plan = plan_of(chat, "Go on")
    assert plan["compaction"]["rounds"] >= 3
    model_server.reply("## Goal\nRound one.")
    model_server.error(500)
    model_server.error(500)  # the client's retry too
    model_server.error(500)
    run = chat.wait(chat.start("Go on"))
    assert run["status"] == "failed"
    stored = summaries(chat)
    # Round one's words, and the facts of its messages it lacked, kept verbatim (CTX-24).
    assert [(s[0], strip_kept(s[1])) for s in stored] == [(1, "## Goal\nRound one.")]
    assert "## Kept verbatim\n- 12,500 euros" in stored[0][1]
    history = chat.messages()
    assert len(history) == 301  # the 300 imported and the question, nothing lost
    through = [m["id"] for m in history].index(stored[0][2])
    after = plan_of(chat)
    assert all(after["status"][m["id"]] == "summarized" for m in history[: through + 1])
    model_server.reset()
    model_server.default_reply = "## Goal\nGoing on."
    assert chat.turn("Go on, please")["status"] == "completed"
    assert len(summaries(chat)) >= 3
    assert_within_window(model_server, 8192, after["tokens"]["reserve"])
