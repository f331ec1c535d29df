"""The OpenAI-compatible endpoint (issue 17, part 1) driven by real OpenAI clients — the
official ``openai`` SDK (sync, async, streaming, tools) and LangChain's ``ChatOpenAI`` —
against a real ``chatmem serve`` and the fake provider (in this process, so its recorded
requests are at hand)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from sqlalchemy import update
from tests.support.model_server import DEFAULT_REPLY, FakeModelServer
from tests.support.openai_world import OpenAIWorld, fresh, serve
from tests.support.serve import ServeProcess

from chatmem.context import get_tokenizer
from chatmem.store.db import Database
from chatmem.store.tables.profiles import ModelProfile

pytestmark = pytest.mark.slow

WINDOW = 8192
HEADER = "X-Chatmem-Conversation"


class World(OpenAIWorld):
    def __init__(self, server: ServeProcess, model: FakeModelServer) -> None:
        super().__init__(server, model)
        self.ann = server.signed_in("ann")
        self.bob = server.signed_in("bob")
        self.default = self.ann
        self.profile_id = self.add_profile(
            self.ann,
            "fake",
            context_window=WINDOW,
            answer_reserve=1024,
            tokenizer="o200k_base",
        )

    def stored(self, conversation_id: str) -> list[dict[str, Any]]:
        response = self.ann.get(f"/api/v1/conversations/{conversation_id}/messages")
        assert response.status_code == 200, response.text
        body = response.json()
        return list(body["items"] if isinstance(body, dict) else body)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    yield from serve(tmp_path_factory, "serve-openai", World)


@pytest.fixture
def w(world: World) -> Iterator[World]:
    yield from fresh(world)


def roles(messages: list[dict[str, Any]]) -> list[str]:
    return [m["role"] for m in messages]


def test_models_lists_the_profiles_and_auto(w: World) -> None:
    names = [m.id for m in w.sdk().models.list()]
    assert names == ["fake", "auto"]
    assert w.sdk().models.retrieve("fake").id == "fake"
    with pytest.raises(openai.NotFoundError) as caught:
        w.sdk().models.retrieve("gpt-9")
    assert caught.value.code == "model_not_found"


def test_new_conversation_is_named_in_the_header(w: World) -> None:
    raw = w.sdk().chat.completions.with_raw_response.create(
        model="fake", messages=[{"role": "user", "content": "Hello"}]
    )
    conversation_id = raw.headers[HEADER]
    completion = raw.parse()
    assert completion.choices[0].message.content == DEFAULT_REPLY
    assert completion.choices[0].finish_reason == "stop"
    assert completion.usage is not None and completion.usage.completion_tokens > 0
    stored = w.stored(conversation_id)
    assert [(m["role"], m["content"]) for m in stored] == [
        ("user", "Hello"),
        ("assistant", DEFAULT_REPLY),
    ]
    # The turn is a chatmem run of that conversation, as the UI sees it.
    runs = w.ann.get(f"/api/v1/conversations/{conversation_id}/runs").json()["items"]
    assert [r["status"] for r in runs] == ["completed"]


def test_full_history_for_200_turns_stores_each_message_once_within_the_window(
    w: World,
) -> None:
    client = w.sdk()
    history: list[dict[str, Any]] = [{"role": "system", "content": "You are terse."}]
    conversation_id: str | None = None
    for i in range(200):
        history.append(
            {"role": "user", "content": f"Question {i}: " + "tell me about the sea " * 20}
        )
        w.model.reply(f"Answer {i}.")
        raw = client.chat.completions.with_raw_response.create(
            model="fake",
            messages=history,  # type: ignore[arg-type]
            extra_headers={HEADER: conversation_id} if conversation_id else None,
        )
        if conversation_id is None:
            conversation_id = raw.headers[HEADER]
        assert raw.headers[HEADER] == conversation_id  # never a new conversation
        answer = raw.parse().choices[0].message.content
        history.append({"role": "assistant", "content": answer})
    assert conversation_id is not None
    stored = w.stored(conversation_id)
    assert [(m["role"], m["content"]) for m in stored] == [
        (m["role"], m["content"]) for m in history
    ]
    # Every request chatmem sent fits the window, counted with the profile's tokenizer; the
    # memory was compacted (the last request holds far less than the whole history).
    tokenizer = get_tokenizer("o200k_base")
    sent = w.model.chat_requests
    for request in sent:
        text = sum(tokenizer.count(str(m.get("content") or "")) for m in request.messages)
        assert text <= WINDOW
    answers = [r for r in sent if r.body.get("tools") is None and r.messages[-1]["role"] == "user"]
    assert len(answers[-1].messages) < len(history) // 2


def test_only_new_messages_get_the_memory(w: World) -> None:
    client = w.sdk()
    raw = client.chat.completions.with_raw_response.create(
        model="fake", messages=[{"role": "user", "content": "My name is Ann."}]
    )
    conversation_id = raw.headers[HEADER]
    client.chat.completions.create(
        model="fake",
        messages=[{"role": "user", "content": "What is my name?"}],
        extra_headers={HEADER: conversation_id},
    )
    sent = w.model.chat_requests[-1].messages
    assert [m["content"] for m in sent if m["role"] == "user"] == [
        "My name is Ann.",
        "What is my name?",
    ]
    assert len(w.stored(conversation_id)) == 4


def test_metadata_names_the_conversation_too(w: World) -> None:
    client = w.sdk()
    raw = client.chat.completions.with_raw_response.create(
        model=w.profile_id, messages=[{"role": "user", "content": "one"}]
    )
    conversation_id = raw.headers[HEADER]
    again = client.chat.completions.with_raw_response.create(
        model="fake",
        messages=[{"role": "user", "content": "two"}],
        metadata={"conversation_id": conversation_id},
    )
    assert again.headers[HEADER] == conversation_id
    assert len(w.stored(conversation_id)) == 4


def test_divergent_history_starts_a_new_conversation(w: World) -> None:
    client = w.sdk()
    first = [{"role": "user", "content": "Pick a colour."}]
    raw = client.chat.completions.with_raw_response.create(model="fake", messages=first)  # type: ignore[arg-type]
    conversation_id = raw.headers[HEADER]
    edited = [
        {"role": "user", "content": "Pick a number."},  # the client edited the first message
        {"role": "assistant", "content": DEFAULT_REPLY},
        {"role": "user", "content": "Why?"},
    ]
    branch = client.chat.completions.with_raw_response.create(
        model="fake",
        messages=edited,  # type: ignore[arg-type]
        extra_headers={HEADER: conversation_id},
    )
    new_id = branch.headers[HEADER]
    assert new_id != conversation_id
    assert [m["content"] for m in w.stored(conversation_id)] == ["Pick a colour.", DEFAULT_REPLY]
    assert [m["content"] for m in w.stored(new_id)] == [
        "Pick a number.",
        DEFAULT_REPLY,
        "Why?",
        DEFAULT_REPLY,
    ]


def test_streaming_with_usage(w: World) -> None:
    w.model.reply("Streamed words arrive in pieces.")
    stream = w.sdk().chat.completions.create(
        model="fake",
        messages=[{"role": "user", "content": "Stream please"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "Streamed words arrive in pieces."
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices]
    assert finishes[-1] == "stop"
    assert chunks[-1].choices == [] and chunks[-1].usage is not None
    assert chunks[-1].usage.completion_tokens > 0


def test_async_client_streams_too(w: World) -> None:
    async def main() -> str:
        client = w.async_sdk()
        async with client:
            stream = await client.chat.completions.create(
                model="fake", messages=[{"role": "user", "content": "hi"}], stream=True
            )
            return "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])

    assert asyncio.run(main()) == DEFAULT_REPLY


def test_client_tool_round_trip(w: World) -> None:
    client = w.sdk()
    tools = [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "The weather in a city",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
            },
        }
    ]
    w.model.tool_call("get_weather", {"city": "Oslo"}, id="call_1")
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Weather in Oslo?"}]
    raw = client.chat.completions.with_raw_response.create(
        model="fake",
        messages=messages,  # type: ignore[arg-type]
        tools=tools,  # type: ignore[arg-type]
    )
    conversation_id = raw.headers[HEADER]
    choice = raw.parse().choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.tool_calls is not None
    call = choice.message.tool_calls[0]
    assert (call.id, call.function.name, json.loads(call.function.arguments)) == (
        "call_1",
        "get_weather",
        {"city": "Oslo"},
    )
    assert w.model.chat_requests[-1].body["tools"][0]["function"]["name"] == "get_weather"
    # The client runs the tool and sends the result with the whole history.
    w.model.reply("It is sunny in Oslo.")
    messages += [
        choice.message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": "call_1", "content": "sunny, 21 C"},
    ]
    final = client.chat.completions.create(
        model="fake",
        messages=messages,  # type: ignore[arg-type]
        tools=tools,  # type: ignore[arg-type]
        extra_headers={HEADER: conversation_id},
    )
    assert final.choices[0].message.content == "It is sunny in Oslo."
    sent = w.model.chat_requests[-1].messages
    assert sent[-1] == {"role": "tool", "tool_call_id": "call_1", "content": "sunny, 21 C"}
    assert sent[-2]["tool_calls"][0]["id"] == "call_1"
    stored = w.stored(conversation_id)
    assert roles(stored) == ["user", "assistant", "tool", "assistant"]
    assert stored[1]["tool_calls"][0]["name"] == "get_weather"


def test_streamed_tool_call(w: World) -> None:
    w.model.tool_call("lookup", {"q": "x"}, id="call_s")
    stream = w.sdk().chat.completions.create(
        model="fake",
        messages=[{"role": "user", "content": "look it up"}],
        tools=[{"type": "function", "function": {"name": "lookup", "parameters": {}}}],
        stream=True,
    )
    chunks = [c for c in stream if c.choices]
    calls = [tc for c in chunks for tc in (c.choices[0].delta.tool_calls or [])]
    assert [(tc.id, tc.function.name) for tc in calls if tc.function] == [("call_s", "lookup")]
    assert chunks[-1].choices[0].finish_reason == "tool_calls"


def test_langchain_chat_openai(w: World) -> None:
    w.model.reply("Paris.")
    chat = ChatOpenAI(
        model="fake",
        base_url=w.server.url + "/v1",
        api_key=w.token(w.ann),  # type: ignore[arg-type]
        max_retries=0,
    )
    answer = chat.invoke([HumanMessage("Capital of France?")])
    assert answer.content == "Paris."
    w.model.reply("Lyon.")
    history = [HumanMessage("Capital of France?"), AIMessage("Paris."), HumanMessage("And #2?")]
    streamed = "".join(str(part.content) for part in chat.stream(history))
    assert streamed == "Lyon."


def test_does_not_fit_is_context_length_exceeded(w: World) -> None:
    huge = "word " * 9000
    with pytest.raises(openai.BadRequestError) as caught:
        w.sdk().chat.completions.create(model="fake", messages=[{"role": "user", "content": huge}])
    assert caught.value.code == "context_length_exceeded"
    assert caught.value.status_code == 400
    assert w.model.chat_requests == []  # refused before the provider was asked


def test_errors_in_openai_shape(w: World) -> None:
    bad_key = openai.OpenAI(base_url=w.server.url + "/v1", api_key="nope", max_retries=0)
    with pytest.raises(openai.AuthenticationError) as auth:
        bad_key.models.list()
    assert auth.value.code == "invalid_api_key"
    with pytest.raises(openai.NotFoundError) as model:
        w.sdk().chat.completions.create(model="gpt-9", messages=[{"role": "user", "content": "x"}])
    assert model.value.code == "model_not_found"
    response = httpx.post(
        w.server.url + "/v1/chat/completions",
        headers={"Authorization": f"Bearer {w.token(w.ann)}"},
        json={"model": "fake", "messages": []},
    )
    assert response.status_code == 400
    assert set(response.json()["error"]) >= {"message", "type", "code"}
    # The JSON bounds hold on /v1/ as on /api/ (SEC-1), answered in OpenAI's shape.
    deep: Any = "x"
    for _ in range(200):
        deep = [deep]
    bounded = httpx.post(
        w.server.url + "/v1/chat/completions",
        headers={"Authorization": f"Bearer {w.token(w.ann)}"},
        # ``user`` nested this deep: the bounds refuse it before the schema reads it.
        json={"model": "fake", "messages": [{"role": "user", "content": "x"}], "user": deep},
    )
    assert bounded.status_code == 400, bounded.text
    assert "deep" in bounded.json()["error"]["message"]
    assert bounded.json()["error"]["type"] == "invalid_request_error"
    # The rest of the API keeps chatmem's own shape.
    other = w.ann.get("/api/v1/conversations/nope")
    assert other.json()["error"]["code"] == "not_found"


def test_another_users_conversation_is_not_found(w: World) -> None:
    raw = w.sdk().chat.completions.with_raw_response.create(
        model="fake", messages=[{"role": "user", "content": "mine"}]
    )
    conversation_id = raw.headers[HEADER]
    profile = w.bob.post(
        "/api/v1/profiles",
        json={"name": "fake", "base_url": w.model.base_url, "model": "m", "free": True},
    )
    assert profile.status_code == 201, profile.text
    with pytest.raises(openai.NotFoundError) as caught:
        w.sdk(w.bob).chat.completions.create(
            model="fake",
            messages=[{"role": "user", "content": "let me in"}],
            extra_headers={HEADER: conversation_id},
        )
    assert caught.value.code == "not_found"
    assert len(w.stored(conversation_id)) == 2


def test_provider_failure_is_an_openai_error(w: World) -> None:
    w.model.error(401)  # the provider refuses chatmem's key: a 502 the client cannot fix
    with pytest.raises(openai.APIStatusError) as caught:
        w.sdk().chat.completions.create(model="fake", messages=[{"role": "user", "content": "x"}])
    assert caught.value.status_code == 502
    assert isinstance(caught.value.body, dict) and caught.value.body["code"] == "provider_auth"


def test_auto_answers_with_the_best_ranked_shared_profile(w: World) -> None:
    admin = w.server.signed_in("root", admin=True)
    shared = admin.post(
        "/api/v1/profiles",
        json={
            "name": "house",
            "base_url": w.model.base_url,
            "model": "fake-model",
            "free": True,
            "shared": True,
        },
    )
    assert shared.status_code == 201, shared.text
    db = Database(w.server.database_url)
    try:
        with db.session() as session:
            session.execute(
                update(ModelProfile)
                .where(ModelProfile.id == shared.json()["id"])
                .values(auto_rank=1)
            )
    finally:
        db.dispose()
    raw = w.sdk().chat.completions.with_raw_response.create(
        model="auto", messages=[{"role": "user", "content": "anyone?"}]
    )
    assert raw.parse().model == "house"
    conversation = w.ann.get(f"/api/v1/conversations/{raw.headers[HEADER]}").json()
    assert conversation["profile_id"] == "auto"


def test_a_running_completion_is_a_chatmem_run_locked_and_stoppable(w: World) -> None:
    client = w.sdk()
    first = client.chat.completions.with_raw_response.create(
        model="fake", messages=[{"role": "user", "content": "start"}]
    )
    conversation_id = first.headers[HEADER]
    w.model.reply("a long answer " * 50, delay=0.05)
    with client.chat.completions.with_streaming_response.create(
        model="fake",
        messages=[{"role": "user", "content": "talk"}],
        stream=True,
        extra_headers={HEADER: conversation_id},
    ) as response:
        run_id = response.headers["X-Chatmem-Run-Id"]
        chunks = response.parse()
        next(iter(chunks))  # the answer is under way
        # The conversation is locked for the run, as for a turn from the UI.
        with pytest.raises(openai.ConflictError) as busy:
            client.chat.completions.create(
                model="fake",
                messages=[{"role": "user", "content": "me too"}],
                extra_headers={HEADER: conversation_id},
            )
        assert busy.value.code == "turn_running"
        # Stop, as the UI's button does.
        assert w.ann.post(f"/api/v1/runs/{run_id}/stop").status_code == 200
        rest = list(chunks)
    assert rest[-1].choices[0].finish_reason == "stop"
    assert w.ann.get(f"/api/v1/runs/{run_id}").json()["status"] == "stopped"


def test_langchain_tool_round_trip_in_one_conversation(w: World) -> None:
    @tool
    def local_time(city: str) -> str:
        """The local time in a city."""
        return "12:00"

    base = {
        "model": "fake",
        "base_url": w.server.url + "/v1",
        "api_key": w.token(w.ann),
        "max_retries": 0,
    }
    w.model.tool_call("local_time", {"city": "Oslo"}, id="call_t")
    first = ChatOpenAI(**base, include_response_headers=True).bind_tools([local_time])
    history: list[Any] = [HumanMessage("Time in Oslo?")]
    asked = first.invoke(history)
    assert isinstance(asked, AIMessage)
    assert [c["name"] for c in asked.tool_calls] == ["local_time"]
    conversation_id = asked.response_metadata["headers"][HEADER.lower()]
    history += [
        asked,
        ToolMessage(local_time.invoke(asked.tool_calls[0]["args"]), tool_call_id="call_t"),
    ]
    w.model.reply("It is noon in Oslo.")
    same = ChatOpenAI(**base, default_headers={HEADER: conversation_id}).bind_tools([local_time])
    assert same.invoke(history).content == "It is noon in Oslo."
    assert roles(w.stored(conversation_id)) == ["user", "assistant", "tool", "assistant"]


def test_a_regenerated_answer_is_matched_by_the_version_shown(w: World) -> None:
    """The client saw the shown version only: its full history matches, nothing is stored
    twice and no new conversation starts (hidden versions are not part of the history)."""
    client = w.sdk()
    w.model.reply("Blue.")
    question = [{"role": "user", "content": "Pick a colour."}]
    raw = client.chat.completions.with_raw_response.create(model="fake", messages=question)  # type: ignore[arg-type]
    conversation_id = raw.headers[HEADER]
    (asked, _answer) = w.stored(conversation_id)
    w.model.reply("Green.")
    redo = w.ann.post(f"/api/v1/conversations/{conversation_id}/messages/{asked['id']}/regenerate")
    assert redo.status_code == 202, redo.text
    with w.ann.stream("GET", f"/api/v1/runs/{redo.json()['run_id']}/events") as events:
        assert any(line.startswith("event: done") for line in events.iter_lines())
    history = [
        *question,
        {"role": "assistant", "content": "Green."},
        {"role": "user", "content": "Why green?"},
    ]
    again = client.chat.completions.with_raw_response.create(
        model="fake",
        messages=history,  # type: ignore[arg-type]
        extra_headers={HEADER: conversation_id},
    )
    assert again.headers[HEADER] == conversation_id
    assert [m["content"] for m in w.stored(conversation_id)] == [
        "Pick a colour.",
        "Green.",
        "Why green?",
        DEFAULT_REPLY,
    ]


def test_a_reasoning_models_thinking_is_reasoning_content(w: World) -> None:
    """The thinking reaches an SDK client as ``reasoning_content`` (DeepSeek's and llama.cpp's
    name for it), streamed and in a whole answer; the answer's text is the answer alone."""
    w.model.reply("Four.", reasoning="Two plus two is four.")
    stream = w.sdk().chat.completions.create(
        model="fake", messages=[{"role": "user", "content": "2+2?"}], stream=True
    )
    chunks = [c for c in stream if c.choices]
    thought = "".join(getattr(c.choices[0].delta, "reasoning_content", None) or "" for c in chunks)
    assert thought == "Two plus two is four."
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == "Four."
    w.model.reply("Six.", reasoning="Three times two.")
    answer = w.sdk().chat.completions.create(
        model="fake",
        messages=[
            {"role": "user", "content": "2+2?"},
            {"role": "assistant", "content": "Four."},
            {"role": "user", "content": "3*2?"},
        ],
    )
    message = answer.choices[0].message
    assert message.content == "Six."
    assert getattr(message, "reasoning_content", None) == "Three times two."


def test_an_answer_cut_at_the_output_limit_finishes_with_length(w: World) -> None:
    """LangChain and the SDKs tell a truncated answer by ``finish_reason: "length"``."""
    w.model.reply("Once upon a", finish_reason="length")
    stream = w.sdk().chat.completions.create(
        model="fake", messages=[{"role": "user", "content": "A story"}], stream=True
    )
    finishes = [c.choices[0].finish_reason for c in stream if c.choices]
    assert finishes[-1] == "length"
    w.model.reply("Once upon a", finish_reason="length")
    answer = w.sdk().chat.completions.create(
        model="fake", messages=[{"role": "user", "content": "Another story"}]
    )
    assert answer.choices[0].finish_reason == "length"
