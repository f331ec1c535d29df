"""Real providers' quirks through the HTTP API (PROV-1, PROV-2, PROV-5, issue 11).

The fake model server reproduces each behaviour seen with real servers: llama.cpp streams no
usage and answers a prompt beyond its context with an empty HTTP 200 stream (its plain
request gives the 400); some servers refuse ``stream_options``; every server names the token
count in its own words; a runaway answer is megabytes long.  Each test checks what a user and
the ledger see, and that the conversation goes on afterwards.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select
from tests.support.mcp_server import McpServerProcess, running_mcp_server, wait_until_ready
from tests.support.model_server import CONTEXT_ERRORS, FakeModelServer, prompt_tokens
from tests.turns.conftest import Chat, make_chat, seed_pairs

from chatmem.store.ledger import record_usage
from chatmem.store.tables.runs import UsageRow
from chatmem.turns import inputs as turn_inputs

WINDOW = 8192
RESERVE = 1024
WORDS = ["the", "kitchen", "budget", "is", "grey", "oak", "tiles", "and", "a", "window"]


def prose(chars: int, seed: int = 0) -> str:
    """Ordinary English of about ``chars`` characters: chatmem estimates it at roughly a
    quarter of a token per character; the fake server counts one per character."""
    rng = random.Random(seed)
    words: list[str] = []
    length = 0
    while length < chars:
        word = rng.choice(WORDS)
        words.append(word)
        length += len(word) + 1
    return " ".join(words)


def ledger(chat: Chat) -> list[UsageRow]:
    with chat.client.app.state.db.session() as session:  # type: ignore[attr-defined]
        rows = session.scalars(
            select(UsageRow)
            .where(UsageRow.conversation_id == chat.conversation_id)
            .order_by(UsageRow.num)
        ).all()
        session.expunge_all()
        return list(rows)


def plan_of(chat: Chat, draft: str | None = None) -> dict[str, Any]:
    params = {"draft": draft} if draft is not None else {}
    response = chat.client.get(
        f"/api/v1/conversations/{chat.conversation_id}/context", params=params, headers=chat.headers
    )
    assert response.status_code == 200, response.text
    return dict(response.json())


def small_chat(client: TestClient, model: FakeModelServer, **profile: Any) -> Chat:
    return make_chat(
        client,
        model,
        profile={"context_window": WINDOW, "answer_reserve": RESERVE, **profile},
    )


# --- PROV-1: usage ------------------------------------------------------------------------


def test_an_answer_without_usage_is_counted_and_marked_estimated_PROV_1(chat: Chat) -> None:
    chat.model.reply("Hello there, this is a streamed answer.", report_usage=False)
    run = chat.turn("Hi")
    assert run["status"] == "completed"
    assert chat.model.chat_requests[-1].body["stream_options"] == {"include_usage": True}
    (row,) = ledger(chat)
    assert row.kind == "answer" and row.estimated is True
    assert row.completion_tokens >= 8  # counted with the profile's tokenizer, never 0
    assert row.prompt_tokens > 0 and row.cost > 0  # the profile is not free: never free
    assert run["usage"] == {
        "prompt_tokens": row.prompt_tokens,
        "completion_tokens": row.completion_tokens,
    }
    assert run["cost"] == pytest.approx(row.cost)
    usage = chat.client.get("/api/v1/usage", headers=chat.headers).json()
    assert usage["total"] == pytest.approx(row.cost)


def test_a_reported_answer_is_not_marked_estimated(chat: Chat) -> None:
    chat.model.reply("Answer.", usage=(120, 7))
    chat.turn("Hi")
    (row,) = ledger(chat)
    assert (row.prompt_tokens, row.completion_tokens, row.estimated) == (120, 7, False)


def test_a_server_that_refuses_stream_options_is_asked_without_it_PROV_1(chat: Chat) -> None:
    chat.model.reject_field("stream_options")
    chat.model.reply("First answer.", report_usage=False)
    assert chat.turn("One")["status"] == "completed"
    chat.model.reply("Second answer.", report_usage=False)
    assert chat.turn("Two")["status"] == "completed"
    bodies = [r.body for r in chat.model.chat_requests]
    assert len(bodies) == 3
    assert "stream_options" in bodies[0]
    assert all("stream_options" not in body for body in bodies[1:])
    rows = ledger(chat)
    assert [r.estimated for r in rows] == [True, True]
    assert all(r.completion_tokens > 0 and r.cost > 0 for r in rows)
    assert [m["content"] for m in chat.messages() if m["role"] == "assistant"] == [
        "First answer.",
        "Second answer.",
    ]


def test_a_stopped_answer_without_usage_is_billed_as_counted_PROV_1(chat: Chat) -> None:
    chat.model.reply(" ".join(f"w{i}" for i in range(40)), delay=0.05, report_usage=False)
    run_id = chat.start("Talk")
    seen = chat.events(run_id, limit=3)
    assert seen[-1]["event"] == "delta"
    chat.client.post(f"/api/v1/runs/{run_id}/stop", headers=chat.headers)
    assert chat.wait(run_id)["status"] == "stopped"
    (row,) = ledger(chat)
    assert row.estimated is True and row.completion_tokens >= 1 and row.cost > 0


def test_a_summary_without_usage_is_counted_and_marked_estimated_PROV_1(chat: Chat) -> None:
    seed_pairs(chat, 4)
    chat.model.reply("Goal: squares. Facts: 1, 4, 9, 16.", report_usage=False)
    response = chat.client.post(
        f"/api/v1/conversations/{chat.conversation_id}/compact", json={}, headers=chat.headers
    )
    assert response.status_code == 200, response.text
    (row,) = ledger(chat)
    assert row.kind == "compaction" and row.estimated is True
    assert row.prompt_tokens > 0 and row.completion_tokens > 0 and row.cost > 0


def test_the_calibration_learns_only_from_reported_usage_CTX_2(chat: Chat) -> None:
    db = chat.client.app.state.db  # type: ignore[attr-defined]
    calibrations(chat).forget(chat.profile_id)
    with db.session() as session:
        # Counted rows say nothing about the provider's tokenizer, whatever they hold.
        for _ in range(3):
            record_usage(
                session,
                user_id=chat.user.id,
                conversation_id=chat.conversation_id,
                run_id=None,
                kind="answer",
                profile_id=chat.profile_id,
                model="fake-model",
                prompt_tokens=5000,
                completion_tokens=10,
                cost=0.01,
                estimated_prompt_tokens=1000,
                estimated=True,
            )
    with db.session() as session:
        assert calibrations(chat).factor(session, chat.profile_id) == 1.0
    calibrations(chat).forget(chat.profile_id)
    with db.session() as session:
        record_usage(
            session,
            user_id=chat.user.id,
            conversation_id=chat.conversation_id,
            run_id=None,
            kind="answer",
            profile_id=chat.profile_id,
            model="fake-model",
            prompt_tokens=1500,
            completion_tokens=10,
            cost=0.01,
            estimated_prompt_tokens=1000,
        )
    with db.session() as session:
        assert calibrations(chat).factor(session, chat.profile_id) == pytest.approx(1.5)


def test_reported_usage_scales_the_history_too_and_does_not_feed_on_itself_CTX_2(
    chat: Chat,
) -> None:
    seed_pairs(chat, 3)
    before = plan_of(chat)["tokens"]["messages"]
    # The provider counts twice what chatmem estimated, every time.
    for i in range(3):
        used = plan_of(chat, draft=f"Question {i}")["tokens"]["used"]
        raw = max(1, round(used / calibration_now(chat)))
        chat.model.reply("ok", usage=(2 * raw, 1))
        chat.turn(f"Question {i}")
        calibrations(chat).forget(chat.profile_id)  # read the ledger again
        assert calibration_now(chat) == pytest.approx(2.0, rel=0.05)
    after = plan_of(chat)["tokens"]["messages"]
    assert after >= 2 * before  # the stored history is counted at the provider's rate


def calibrations(chat: Chat) -> turn_inputs.Calibrations:
    """The app's calibrations (owned by its turn service)."""
    return chat.client.app.state.turns.calibrations  # type: ignore[attr-defined, no-any-return]


def test_a_calibration_is_read_again_only_after_its_time_CTX_2(chat: Chat) -> None:
    now = [100.0]
    known = turn_inputs.Calibrations(ttl=10, clock=lambda: now[0])
    db = chat.client.app.state.db  # type: ignore[attr-defined]
    known.learn(chat.profile_id, 1.25)
    with db.session() as session:
        assert known.factor(session, chat.profile_id) == 1.25  # the ledger is not read
        now[0] += 10.0
        assert known.factor(session, chat.profile_id) == 1.0  # read again: no answers yet


def calibration_now(chat: Chat) -> float:
    with chat.client.app.state.db.session() as session:  # type: ignore[attr-defined]
        return calibrations(chat).factor(session, chat.profile_id)


# --- PROV-2: context errors ---------------------------------------------------------------


def test_llama_cpps_empty_stream_after_a_large_prompt_gives_the_context_advice_PROV_2(
    turn_client: TestClient, model_server: FakeModelServer
) -> None:
    chat = small_chat(turn_client, model_server)
    seed_pairs(chat, 3)
    model_server.limit_context(WINDOW, style="llama_cpp")
    model_server.report_usage(False)
    big = prose(10_000)
    plan = plan_of(chat, draft=big)
    assert plan["fits"] is True and plan["tokens"]["used"] < WINDOW - RESERVE  # we undercount

    run = chat.turn(big)
    assert run["status"] == "failed"
    assert run["error"]["code"] == "context_length_exceeded"
    assert "Economy" in run["error"]["message"]
    last = chat.events(run["id"])[-1]
    assert last["event"] == "error" and last["data"]["code"] == "context_length_exceeded"
    streamed, probe = model_server.chat_requests
    assert streamed.body["stream"] is True
    assert probe.body["stream"] is False and probe.body["max_tokens"] == 1
    assert probe.body["messages"] == streamed.body["messages"]
    counted = prompt_tokens(probe.body)
    assert counted > WINDOW
    (overflow,) = [r for r in ledger(chat) if r.kind == "overflow"]
    assert overflow.prompt_tokens == counted and overflow.cost == 0
    assert run["usage"] == {"prompt_tokens": 0, "completion_tokens": 0}  # nothing was billed

    # At once: the same message counts as the provider counted it; the plan says it cannot
    # fit, and admission agrees — nothing is sent.
    again = plan_of(chat, draft=big)
    assert again["fits"] is False and again["level"] == "red"
    assert again["tokens"]["used"] > WINDOW - RESERVE
    refused = chat.submit(big)
    assert refused.status_code == 413, refused.text
    error = refused.json()["error"]
    assert error["code"] == "does_not_fit" and error["needed"] > error["available"]
    assert len(model_server.chat_requests) == 2

    # The conversation is not stuck: a short message folds the history (the big message
    # with it) and is answered; every request the server received from now on fits.
    nxt = plan_of(chat, draft="And the tiles?")
    assert nxt["fits"] is True and nxt["compaction"]["needed"] is True
    run = chat.turn("And the tiles?")
    assert run["status"] == "completed", run
    after = model_server.chat_requests[2:]
    assert after and all(prompt_tokens(r.body) <= WINDOW for r in after)
    assert chat.messages()[-1]["role"] == "assistant"
    # Without usage from the server, every call of that turn was counted, none free.
    rows = [r for r in ledger(chat) if r.run_id == run["id"]]
    assert rows and all(r.estimated and r.completion_tokens > 0 and r.cost > 0 for r in rows)


def test_an_empty_stream_that_the_probe_answers_is_a_plain_provider_error(chat: Chat) -> None:
    chat.model.empty_stream()
    chat.model.reply("x", usage=(40, 1))  # the probe is answered
    run = chat.turn("Hello")
    assert run["status"] == "failed"
    assert run["error"]["code"] == "provider_error"
    assert "empty stream" in run["error"]["message"]
    probe = [r for r in ledger(chat) if r.kind == "probe"]
    assert len(probe) == 1 and probe[0].prompt_tokens == 40 and probe[0].cost > 0
    chat.model.reply("Fine now.")
    assert chat.turn("Again")["status"] == "completed"


@pytest.mark.parametrize("style", sorted(CONTEXT_ERRORS))
def test_the_count_each_server_names_recalibrates_the_profile_at_once_PROV_2(
    turn_client: TestClient, model_server: FakeModelServer, style: str
) -> None:
    chat = small_chat(turn_client, model_server)
    seed_pairs(chat, 2)
    question = prose(19_000, seed=1)
    used = plan_of(chat, draft=question)["tokens"]["used"]
    assert used <= WINDOW - RESERVE  # chatmem thinks it fits
    named = 2 * used + 1000  # the server counts about twice as much: beyond its window
    model_server.context_length_error(style, tokens=named, window=WINDOW)
    run = chat.turn(question)
    assert run["status"] == "failed" and run["error"]["code"] == "context_length_exceeded"
    assert "Economy" in run["error"]["message"]
    (overflow,) = [r for r in ledger(chat) if r.kind == "overflow"]
    if style == "ollama_plain":
        # No count named: at least one more than the window left for that request.
        assert overflow.prompt_tokens > WINDOW - RESERVE
    else:
        assert overflow.prompt_tokens == named
    factor = calibration_now(chat)
    assert factor >= overflow.prompt_tokens / overflow.estimated_prompt_tokens - 1e-9
    # The same request, planned again, does not fit as it is: folded or refused.
    plan = plan_of(chat, draft=question)
    assert plan["fits"] is False or plan["compaction"]["needed"] is True


def test_a_window_smaller_than_the_profile_says_is_named_to_the_user_PROV_2(
    turn_client: TestClient, model_server: FakeModelServer
) -> None:
    chat = small_chat(turn_client, model_server)
    question = prose(15_000)  # ~4,000 tokens: within the profile's 8K, not within the 4K
    model_server.context_length_error("llama_server", tokens=4500, window=4096)
    run = chat.turn(question)
    assert run["error"]["code"] == "context_length_exceeded"
    assert "4,096" in run["error"]["message"] and "8,192" in run["error"]["message"]
    # Still: the same request is not admitted again as it was.
    plan = plan_of(chat, draft="next")
    assert plan["fits"] is False or plan["compaction"]["needed"] is True


# --- PROV-5: size bound -------------------------------------------------------------------


def test_an_answer_past_the_bound_is_stopped_and_kept_up_to_it_PROV_5(
    turn_client: TestClient, model_server: FakeModelServer
) -> None:
    bound = 64 * 1024
    turn_client.app.state.settings.max_answer_bytes = bound  # type: ignore[attr-defined]
    chat = make_chat(turn_client, model_server)
    model_server.large_reply(3_000_000)  # ~3 MB, in 16 KB chunks
    run = chat.turn("Tell me everything")
    assert run["status"] == "failed"
    assert run["error"]["code"] == "answer_too_large"
    assert "64 KB" in run["error"]["message"]
    kept = chat.messages()[-1]
    assert kept["role"] == "assistant"
    assert len(kept["content"].encode()) == bound
    assert kept["meta"]["failed"] is True and kept["meta"]["truncated"] is True
    # The event journal holds no more than the bound either.
    events = chat.events(run["id"])
    streamed = "".join(e["data"]["text"] for e in events if e["event"] == "delta")
    assert streamed == kept["content"]
    assert events[-1]["event"] == "error" and events[-1]["data"]["code"] == "answer_too_large"
    # What arrived was produced and billed: counted, never free.
    (row,) = ledger(chat)
    assert row.completion_tokens > 1000 and row.cost > 0
    # And the conversation goes on.
    model_server.reply("A short answer.")
    assert chat.turn("Shorter, please")["status"] == "completed"


@pytest.fixture(scope="module")
def mcp() -> Iterator[McpServerProcess]:
    with running_mcp_server(token="mcp-secret") as server:
        yield server


def test_a_tool_result_past_the_bound_is_cut_at_it_PROV_5(
    turn_client: TestClient, model_server: FakeModelServer, mcp: McpServerProcess
) -> None:
    bound = 8 * 1024
    turn_client.app.state.settings.max_answer_bytes = bound  # type: ignore[attr-defined]
    chat = make_chat(turn_client, model_server, admin=True)
    created = turn_client.post(
        "/api/v1/mcp-servers",
        json={"name": "tools", "url": mcp.url, "bearer_token": "mcp-secret"},
        headers=chat.headers,
    )
    assert created.status_code == 201, created.text
    wait_until_ready(lambda path: turn_client.get(path, headers=chat.headers), created.json()["id"])
    model_server.tool_call("repeat", {"text": "0123456789", "times": 10_000}, id="call_big")
    model_server.reply("That was long.")
    run_id = chat.start("Repeat it")
    run = chat.wait(run_id)
    assert run["status"] == "completed", run
    tool = next(m for m in chat.messages() if m["role"] == "tool")
    assert len(tool["content"].encode()) <= bound
    assert tool["content"].startswith("0123456789" * 100)
    assert "tool result cut at 8192 bytes: it had 100000 bytes" in tool["content"]
    result = next(e for e in chat.events(run_id) if e["event"] == "tool_result")["data"]
    assert result["content"] == tool["content"]
    sent = model_server.chat_requests[-1].messages
    assert any(m["role"] == "tool" and m["content"] == tool["content"] for m in sent)


def test_the_answer_bound_is_configurable_PROV_5(monkeypatch: pytest.MonkeyPatch) -> None:
    from chatmem.settings import Settings

    monkeypatch.delenv("CHATMEM_MAX_ANSWER_BYTES", raising=False)
    assert Settings().max_answer_bytes == 4 * 1024 * 1024
    monkeypatch.setenv("CHATMEM_MAX_ANSWER_BYTES", "65536")
    assert Settings().max_answer_bytes == 65536


def _offered_tools(chat: Chat) -> list[list[str]]:
    return [
        [tool["function"]["name"] for tool in request.body.get("tools", [])]
        for request in chat.model.chat_requests
    ]


@pytest.mark.parametrize("style", ["ollama", "vllm", "llama_cpp"])
def test_a_model_without_tool_calling_still_answers_when_recall_was_on_by_default(
    chat: Chat, style: str
) -> None:
    """Recall is offered by default in this mode (issue 17); a server that takes no tools
    refused every turn with it.  Now the step goes again without it, and the profile's
    recall switch is off from then on, where its owner sees it."""
    chat.model.refuse_tools(style)
    assert chat.turn("Hello?")["status"] == "completed"
    assert chat.messages()[-1]["content"] == chat.model.default_reply
    assert _offered_tools(chat) == [["recall"], []]  # refused once (a 500 too), never retried
    profile = chat.client.get(f"/api/v1/profiles/{chat.profile_id}", headers=chat.headers)
    assert profile.json()["recall"] is False
    plan = chat.client.get(
        f"/api/v1/conversations/{chat.conversation_id}/context", headers=chat.headers
    ).json()
    assert plan["tokens"]["tools"] == 0  # the plan no longer counts the tool's schema
    assert chat.turn("And now?")["status"] == "completed"
    assert _offered_tools(chat) == [["recall"], [], []]
    assert [row.kind for row in ledger(chat)] == ["answer", "answer"]


def test_tools_somebody_chose_are_not_dropped_the_refusal_says_why(chat: Chat) -> None:
    chat.set(recall=True)
    chat.model.refuse_tools("llama_cpp")
    run = chat.turn("Hello?")
    assert run["status"] == "failed"
    assert run["error"]["code"] == "provider_refuses_tools"
    assert "tools param requires --jinja flag" in run["error"]["message"]
    assert "turn the tools off" in run["error"]["message"]
    assert _offered_tools(chat) == [["recall"]]  # a refusal is not retried like other 500s
    profile = chat.client.get(f"/api/v1/profiles/{chat.profile_id}", headers=chat.headers)
    assert profile.json()["recall"] is None  # nothing changed behind the user's back
    chat.set(recall=False)
    assert chat.turn("Without tools?")["status"] == "completed"


@pytest.mark.parametrize("style", ["reasoning_content", "reasoning", "think_tags"])
def test_a_reasoning_models_thinking_is_shown_and_kept_but_never_sent_back(
    chat: Chat, style: str
) -> None:
    """Watchers see the thinking as it comes (``reasoning`` events, before the text); the
    message keeps it beside the answer; the history sent with the next question holds the
    answer alone, so the thinking costs the window nothing; it is billed as answer tokens."""
    thinking = "The user greets me. I should answer briefly and kindly."
    if style == "think_tags":
        chat.model.reply(f"<think>{thinking}</think>\n\nHello to you.", report_usage=False)
    else:
        chat.model.reply(
            "Hello to you.", reasoning=thinking, reasoning_field=style, report_usage=False
        )
    run_id = chat.start("Hello!")
    assert chat.wait(run_id)["status"] == "completed"
    events = chat.events(run_id)
    kinds = [e["event"] for e in events]
    assert kinds.index("reasoning") < kinds.index("delta")
    assert "".join(e["data"]["text"] for e in events if e["event"] == "reasoning") == thinking
    assert "".join(e["data"]["text"] for e in events if e["event"] == "delta") == "Hello to you."
    answer = chat.messages()[-1]
    assert (answer["content"], answer["meta"]["reasoning"]) == ("Hello to you.", thinking)
    listed = chat.client.get(
        f"/api/v1/conversations/{chat.conversation_id}/messages", headers=chat.headers
    ).json()
    listed = listed.get("items", listed) if isinstance(listed, dict) else listed
    assert listed[-1]["reasoning"] == thinking and listed[-1]["content"] == "Hello to you."
    (row,) = ledger(chat)
    alone = ledger_tokens_of("Hello to you.")
    assert row.estimated and row.completion_tokens > alone  # the thinking is billed too
    chat.model.reply("Fine.")
    assert chat.turn("How are you?")["status"] == "completed"
    sent = chat.model.chat_requests[-1].messages
    assert {"role": "assistant", "content": "Hello to you."} in sent
    assert not any(thinking in str(m.get("content")) for m in sent)


def ledger_tokens_of(text: str) -> int:
    from chatmem.context import get_tokenizer

    return int(get_tokenizer("estimate").count(text))


def test_an_answer_stopped_while_thinking_is_billed_and_leaves_no_empty_message(
    chat: Chat,
) -> None:
    chat.model.reply("Never said.", reasoning="Hmm " * 40, delay=0.05, report_usage=False)
    run_id = chat.start("Think hard")
    seen = chat.events(run_id, limit=3)
    assert [e["event"] for e in seen] == ["reasoning"] * 3
    chat.client.post(f"/api/v1/runs/{run_id}/stop", headers=chat.headers)
    assert chat.wait(run_id)["status"] == "stopped"
    assert [m["role"] for m in chat.messages()] == ["user"]
    (row,) = ledger(chat)
    assert row.completion_tokens >= 1 and row.cost > 0


@pytest.mark.parametrize("reason", ["length", "content_filter"])
def test_an_answer_cut_short_says_so(chat: Chat, reason: str) -> None:
    """The provider's finish reason is kept when it means the answer did not end by itself:
    on the message (the feed says so), in ``done``; a finished answer says nothing."""
    chat.model.reply("It was a dark and stormy", finish_reason=reason)
    run_id = chat.start("Tell me a story")
    assert chat.wait(run_id)["status"] == "completed"
    done = chat.events(run_id)[-1]
    assert (done["event"], done["data"]["finish_reason"]) == ("done", reason)
    listed = chat.client.get(
        f"/api/v1/conversations/{chat.conversation_id}/messages", headers=chat.headers
    ).json()["items"]
    assert (listed[-1]["content"], listed[-1]["finish_reason"]) == (
        "It was a dark and stormy",
        reason,
    )
    chat.model.reply("The end.")
    run_id = chat.start("Go on")
    assert chat.wait(run_id)["status"] == "completed"
    assert chat.events(run_id)[-1]["data"]["finish_reason"] is None
    listed = chat.client.get(
        f"/api/v1/conversations/{chat.conversation_id}/messages", headers=chat.headers
    ).json()["items"]
    assert listed[-1]["finish_reason"] is None
