"""OpenAI's Responses and Conversations APIs over chatmem conversations (issue 29, section 3;
API-3), driven by the real clients — the ``openai`` SDK (``responses.create``,
``responses.stream``, ``conversations``) and LangChain's ``ChatOpenAI(use_responses_api=True)``
— against a real ``chatmem serve`` and the fake provider, whose recorded requests show what
each turn sent (always Chat Completions, always the engine's plan)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import openai
import pytest
from langchain_core.messages import HumanMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from pydantic import BaseModel
from tests.api.test_openai_compat import HEADER, World, roles, w, world
from tests.api.test_openai_params import png_data_url
from tests.support.model_server import DEFAULT_REPLY

pytestmark = pytest.mark.slow

__all__ = ["w", "world"]  # the fixtures, shared with the chat endpoint's tests

WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "The weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
}


def conversation_of(w: World, response_id: str) -> str:
    got = w.sdk().responses.retrieve(response_id)
    assert got.conversation is not None
    return got.conversation.id


def test_create_answers_a_response_in_a_new_conversation(w: World) -> None:
    w.model.reply("Hi there.", usage=(12, 3))
    raw = w.sdk().responses.with_raw_response.create(model="fake", input="Hello")
    response = raw.parse()
    assert response.id.startswith("resp_")
    assert response.status == "completed"
    assert response.output_text == "Hi there."
    assert [item.type for item in response.output] == ["message"]
    assert response.usage is not None
    assert (response.usage.input_tokens, response.usage.output_tokens) == (12, 3)
    assert response.usage.input_tokens_details.cached_tokens == 0
    conversation_id = raw.headers[HEADER]
    assert response.conversation is not None and response.conversation.id == conversation_id
    stored = w.stored(conversation_id)
    assert [(m["role"], m["content"]) for m in stored] == [
        ("user", "Hello"),
        ("assistant", "Hi there."),
    ]
    # The provider was asked with Chat Completions.
    assert w.model.chat_requests[-1].messages[-1] == {"role": "user", "content": "Hello"}


def test_previous_response_id_streams_over_several_turns_in_one_conversation(w: World) -> None:
    """Each turn sends only its new input; the conversation holds every message once and
    the provider gets the whole plan (the earlier turns come from chatmem's memory)."""
    client = w.sdk()
    previous: str | None = None
    for i in range(4):
        w.model.reply(f"Answer {i}.")
        with client.responses.stream(
            model="fake",
            input=f"Question {i}",
            instructions="You are terse.",
            previous_response_id=previous,  # type: ignore[arg-type]
        ) as stream:
            kinds = [event.type for event in stream]
            final = stream.get_final_response()
        assert kinds == [
            "response.created",
            "response.in_progress",
            "response.output_item.added",
            "response.content_part.added",
            *["response.output_text.delta"] * 2,  # the fake streams word by word
            "response.output_text.done",
            "response.content_part.done",
            "response.output_item.done",
            "response.completed",
        ]
        assert final.output_text == f"Answer {i}."
        assert final.previous_response_id == previous
        previous = final.id
    assert previous is not None
    conversation_id = conversation_of(w, previous)
    stored = w.stored(conversation_id)
    # The instructions are stored once, each question and answer once.
    assert [(m["role"], m["content"]) for m in stored] == [
        ("system", "You are terse."),
        *[
            pair
            for i in range(4)
            for pair in (("user", f"Question {i}"), ("assistant", f"Answer {i}."))
        ],
    ]
    sent = w.model.chat_requests[-1].messages
    assert sent[0] == {"role": "system", "content": "You are terse."}
    assert [m["content"] for m in sent if m["role"] == "user"] == [
        f"Question {i}" for i in range(4)
    ]
    assert sent[-1] == {"role": "user", "content": "Question 3"}


def test_stream_sequence_numbers_count_up_from_zero(w: World) -> None:
    w.model.reply("One two three.")
    stream = w.sdk().responses.create(model="fake", input="Count", stream=True)
    events = list(stream)
    assert [e.sequence_number for e in events] == list(range(len(events)))
    deltas = [e.delta for e in events if e.type == "response.output_text.delta"]
    assert "".join(deltas) == "One two three."
    done = [e for e in events if e.type == "response.output_text.done"]
    assert [d.text for d in done] == ["One two three."]
    completed = events[-1]
    assert completed.type == "response.completed"
    assert completed.response.output_text == "One two three."
    assert completed.response.usage is not None and completed.response.usage.output_tokens > 0


def test_conversations_create_then_responses_then_items(w: World) -> None:
    client = w.sdk()
    conversation = client.conversations.create(
        items=[{"type": "message", "role": "user", "content": "My name is Ann."}],
        metadata={"topic": "names"},
    )
    w.model.reply("Nice to meet you, Ann.")
    first = client.responses.create(model="fake", conversation=conversation.id, input="Hello!")
    assert first.output_text == "Nice to meet you, Ann."
    w.model.reply("You are Ann.")
    second = client.responses.create(
        model="fake", conversation={"id": conversation.id}, input="Who am I?"
    )
    assert second.conversation is not None and second.conversation.id == conversation.id
    sent = w.model.chat_requests[-1].messages
    assert [m["content"] for m in sent if m["role"] == "user"] == [
        "My name is Ann.",
        "Hello!",
        "Who am I?",
    ]
    got = client.conversations.retrieve(conversation.id)
    assert got.metadata == {"topic": "names"}
    items = list(client.conversations.items.list(conversation.id, order="asc", limit=2))
    texts = [(i.role, i.content[0].text) for i in items if i.type == "message"]  # type: ignore[union-attr]
    assert texts == [
        ("user", "My name is Ann."),
        ("user", "Hello!"),
        ("assistant", "Nice to meet you, Ann."),
        ("user", "Who am I?"),
        ("assistant", "You are Ann."),
    ]  # three pages of two, followed by the SDK through ``after``
    newest = client.conversations.items.list(conversation.id, limit=1)
    assert newest.data[0].content[0].text == "You are Ann."  # type: ignore[union-attr]
    # It is a chatmem conversation like any other: in the user's list.
    listed = w.ann.get("/api/v1/conversations").json()["items"]
    assert conversation.id in [c["id"] for c in listed]


def test_the_conversation_header_names_the_conversation_too(w: World) -> None:
    """For clients that can add a header but not a field (Codex's ``http_headers``)."""
    w.model.reply("First.")
    raw = w.sdk().responses.with_raw_response.create(model="fake", input="One")
    conversation_id = raw.headers[HEADER]
    w.model.reply("Second.")
    w.sdk().responses.create(model="fake", input="Two", extra_headers={HEADER: conversation_id})
    assert [m["content"] for m in w.stored(conversation_id)] == [
        "One",
        "First.",
        "Two",
        "Second.",
    ]


def test_conversation_items_can_be_appended_and_it_can_be_deleted(w: World) -> None:
    client = w.sdk()
    conversation = client.conversations.create()
    added = client.conversations.items.create(
        conversation.id,
        items=[{"type": "message", "role": "user", "content": "Remember: blue."}],
    )
    assert [i.type for i in added.data] == ["message"]
    assert [m["content"] for m in w.stored(conversation.id)] == ["Remember: blue."]
    client.conversations.delete(conversation.id)
    with pytest.raises(openai.NotFoundError):
        client.conversations.retrieve(conversation.id)


def test_function_tool_round_trip_with_function_call_output(w: World) -> None:
    client = w.sdk()
    w.model.tool_call("get_weather", {"city": "Oslo"}, id="call_1")
    first = client.responses.create(
        model="fake",
        input="Weather in Oslo?",
        tools=[WEATHER],  # type: ignore[list-item]
    )
    calls = [item for item in first.output if item.type == "function_call"]
    assert [(c.call_id, c.name, json.loads(c.arguments)) for c in calls] == [
        ("call_1", "get_weather", {"city": "Oslo"})
    ]
    offered = w.model.chat_requests[-1].body["tools"]
    assert offered[0] == {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "The weather in a city",
            "parameters": WEATHER["parameters"],
        },
    }
    w.model.reply("It is sunny in Oslo.")
    final = client.responses.create(
        model="fake",
        previous_response_id=first.id,
        input=[
            # The Agents SDK echoes the call with its output: not stored twice.
            calls[0].model_dump(exclude_none=True),
            {"type": "function_call_output", "call_id": "call_1", "output": "sunny, 21 C"},
        ],
        tools=[WEATHER],  # type: ignore[list-item]
    )
    assert final.output_text == "It is sunny in Oslo."
    sent = w.model.chat_requests[-1].messages
    assert sent[-1] == {"role": "tool", "tool_call_id": "call_1", "content": "sunny, 21 C"}
    assert sent[-2]["tool_calls"][0]["id"] == "call_1"
    conversation_id = conversation_of(w, final.id)
    stored = w.stored(conversation_id)
    assert roles(stored) == ["user", "assistant", "tool", "assistant"]
    # The conversation's items show the round trip as the client made it.
    items = client.conversations.items.list(conversation_id, order="asc").data
    assert [i.type for i in items] == [
        "message",
        "function_call",
        "function_call_output",
        "message",
    ]
    call_item, output_item = items[1], items[2]
    assert call_item.type == "function_call" and call_item.call_id == "call_1"
    assert output_item.type == "function_call_output" and output_item.output == "sunny, 21 C"


async def _async_stream(w: World) -> tuple[list[str], str]:
    client = w.async_sdk()
    async with client.responses.stream(model="fake", input="Async?") as stream:
        kinds = [event.type async for event in stream]
        final = await stream.get_final_response()
    await client.close()
    return kinds, final.output_text


def test_the_async_client_streams_too(w: World) -> None:
    w.model.reply("Yes, async.")
    kinds, text = asyncio.run(_async_stream(w))
    assert (kinds[0], kinds[-1], text) == ("response.created", "response.completed", "Yes, async.")


def test_output_items_echoed_with_previous_response_id_are_not_stored_again(w: World) -> None:
    client = w.sdk()
    w.model.reply("Blue.")
    first = client.responses.create(model="fake", input="Favourite colour?")
    w.model.reply("Because it is calm.")
    second = client.responses.create(
        model="fake",
        previous_response_id=first.id,
        input=[
            *(item.model_dump(exclude_none=True) for item in first.output),
            {"role": "user", "content": "Why?"},
        ],
    )
    assert second.conversation is not None and first.conversation is not None
    assert second.conversation.id == first.conversation.id
    stored = w.stored(second.conversation.id)
    assert [m["content"] for m in stored] == [
        "Favourite colour?",
        "Blue.",
        "Why?",
        "Because it is calm.",
    ]


def test_streamed_function_call_events(w: World) -> None:
    w.model.tool_call("get_weather", {"city": "Rome"}, id="call_s")
    with w.sdk().responses.stream(
        model="fake",
        input="Weather in Rome?",
        tools=[WEATHER],  # type: ignore[list-item]
    ) as stream:
        kinds = [event.type for event in stream]
        final = stream.get_final_response()
    assert kinds == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "response.output_item.done",
        "response.completed",
    ]
    call = final.output[0]
    assert call.type == "function_call"
    assert (call.call_id, json.loads(call.arguments)) == ("call_s", {"city": "Rome"})


class Person(BaseModel):
    name: str
    age: int


def test_text_format_json_schema_reaches_the_provider_as_response_format(w: World) -> None:
    w.model.reply('{"name": "Ann", "age": 31}')
    parsed = w.sdk().responses.parse(model="fake", input="Ann is 31.", text_format=Person)
    assert parsed.output_parsed == Person(name="Ann", age=31)
    sent = w.model.chat_requests[-1].body["response_format"]
    assert sent["type"] == "json_schema"
    assert sent["json_schema"]["name"] == "Person"
    assert sent["json_schema"]["schema"]["properties"]["age"] == {"title": "Age", "type": "integer"}


def test_sampling_and_output_fields_reach_the_provider(w: World) -> None:
    w.model.reply(DEFAULT_REPLY)
    response = w.sdk().responses.create(
        model="fake",
        input="Be brief.",
        max_output_tokens=64,
        temperature=0.2,
        top_p=0.9,
        reasoning={"effort": "low"},
        text={"format": {"type": "json_object"}},
        metadata={"ticket": "42"},
    )
    body = w.model.chat_requests[-1].body
    assert body["max_tokens"] == 64
    assert (body["temperature"], body["top_p"], body["reasoning_effort"]) == (0.2, 0.9, "low")
    assert body["response_format"] == {"type": "json_object"}
    assert (response.max_output_tokens, response.temperature) == (64, 0.2)
    assert response.metadata == {"ticket": "42"}


def test_a_forced_tool_choice_is_passed_in_chats_shape(w: World) -> None:
    w.model.tool_call("get_weather", {"city": "Oslo"}, id="call_f")
    w.sdk().responses.create(
        model="fake",
        input="Weather?",
        tools=[WEATHER],  # type: ignore[list-item]
        tool_choice={"type": "function", "name": "get_weather"},
        parallel_tool_calls=False,
    )
    body = w.model.chat_requests[-1].body
    assert body["tool_choice"] == {"type": "function", "function": {"name": "get_weather"}}
    assert body["parallel_tool_calls"] is False


def test_an_answer_cut_at_max_output_tokens_is_incomplete(w: World) -> None:
    w.model.reply("Once upon a", finish_reason="length")
    stream = w.sdk().responses.create(
        model="fake", input="A story", max_output_tokens=3, stream=True
    )
    last = list(stream)[-1]
    assert last.type == "response.incomplete"
    assert last.response.status == "incomplete"
    assert last.response.incomplete_details is not None
    assert last.response.incomplete_details.reason == "max_output_tokens"
    w.model.reply("Once upon a", finish_reason="length")
    whole = w.sdk().responses.create(model="fake", input="Another", max_output_tokens=3)
    assert whole.status == "incomplete"
    assert whole.output_text == "Once upon a"


def test_hosted_tools_are_refused(w: World) -> None:
    client = w.sdk()
    for tool_ in ({"type": "web_search"}, {"type": "file_search", "vector_store_ids": ["v"]}):
        with pytest.raises(openai.BadRequestError) as caught:
            client.responses.create(model="fake", input="Search", tools=[tool_])  # type: ignore[list-item]
        assert caught.value.status_code == 400
        assert "hosted tools" in caught.value.message
    assert w.model.chat_requests == []  # refused before anything was asked or stored


def _image_input(url: str) -> list[dict[str, Any]]:
    image = {"type": "input_image", "image_url": url, "detail": "low"}
    return [{"role": "user", "content": [{"type": "input_text", "text": "What is it?"}, image]}]


def test_an_input_image_is_a_user_messages_image(w: World) -> None:
    """As on the chat endpoint: data URLs only, for a profile that accepts images."""
    url = png_data_url()
    client = w.sdk()
    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.create(model="fake", input=_image_input(url))  # type: ignore[arg-type]
    assert "takes no images" in caught.value.message
    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.create(
            model="fake",
            input=_image_input("https://example.org/cat.png"),  # type: ignore[arg-type]
        )
    assert "not fetched" in caught.value.message
    assert w.model.chat_requests == []
    vision = w.ann.post(
        "/api/v1/profiles",
        json={
            "name": "vision-r",
            "base_url": w.model.base_url,
            "model": "fake-vision",
            "free": True,
            "context_window": 8192,
            "answer_reserve": 1024,
            "tokenizer": "o200k_base",
            "accepts_images": True,
        },
    )
    assert vision.status_code == 201, vision.text
    w.model.reply("A red square.")
    answered = client.responses.create(model="vision-r", input=_image_input(url))  # type: ignore[arg-type]
    assert answered.output_text == "A red square."
    parts = w.model.chat_requests[-1].messages[-1]["content"]
    assert [p["image_url"]["url"] for p in parts if p["type"] == "image_url"] == [url]


def test_get_and_delete_a_response(w: World) -> None:
    client = w.sdk()
    w.model.reply("Stored.")
    created = client.responses.create(model="fake", input="Keep this", metadata={"k": "v"})
    got = client.responses.retrieve(created.id)
    assert (got.id, got.status, got.output_text) == (created.id, "completed", "Stored.")
    assert got.usage is not None and got.usage.output_tokens == created.usage.output_tokens  # type: ignore[union-attr]
    assert got.metadata == {"k": "v"}
    assert got.conversation is not None
    conversation_id = got.conversation.id
    client.responses.delete(created.id)
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(created.id)
    with pytest.raises(openai.NotFoundError):
        client.responses.create(model="fake", input="More", previous_response_id=created.id)
    # The conversation's messages stay: they are the user's chat.
    assert [m["content"] for m in w.stored(conversation_id)] == ["Keep this", "Stored."]


def test_another_users_response_and_conversation_are_not_found(w: World) -> None:
    w.model.reply("Mine.")
    mine = w.sdk().responses.create(model="fake", input="Private")
    assert mine.conversation is not None
    bob = w.sdk(w.bob)
    with pytest.raises(openai.NotFoundError):
        bob.responses.retrieve(mine.id)
    with pytest.raises(openai.NotFoundError):
        bob.responses.delete(mine.id)
    with pytest.raises(openai.NotFoundError):
        bob.responses.create(model="fake", input="Hi", previous_response_id=mine.id)
    with pytest.raises(openai.NotFoundError):
        bob.conversations.retrieve(mine.conversation.id)
    with pytest.raises(openai.NotFoundError):
        bob.conversations.items.list(mine.conversation.id)
    with pytest.raises(openai.NotFoundError):
        bob.responses.create(model="fake", input="Hi", conversation=mine.conversation.id)
    with pytest.raises(openai.NotFoundError):
        bob.conversations.delete(mine.conversation.id)
    assert w.sdk().responses.retrieve(mine.id).output_text == "Mine."


def test_store_false_answers_without_storing(w: World) -> None:
    w.model.reply("A title")
    listed_before = w.ann.get("/api/v1/conversations").json()["items"]
    response = w.sdk().responses.create(model="fake", input="Name this chat", store=False)
    assert response.output_text == "A title"
    assert w.ann.get("/api/v1/conversations").json()["items"] == listed_before
    with pytest.raises(openai.NotFoundError):
        w.sdk().responses.retrieve(response.id)


def test_langchain_chat_openai_with_the_responses_api(w: World) -> None:
    chat = ChatOpenAI(
        model="fake",
        base_url=w.server.url + "/v1",
        api_key=w.token(w.ann),  # type: ignore[arg-type]
        max_retries=0,
        use_responses_api=True,
        use_previous_response_id=True,
    )
    w.model.reply("Paris.")
    history: list[Any] = [HumanMessage("Capital of France?")]
    answer = chat.invoke(history)
    assert answer.text == "Paris."
    history += [answer, HumanMessage("And of Italy?")]
    w.model.reply("Rome.")
    streamed = "".join(chunk.text for chunk in chat.stream(history))
    assert streamed == "Rome."
    sent = w.model.chat_requests[-1].messages
    assert [m["content"] for m in sent] == ["Capital of France?", "Paris.", "And of Italy?"]


def test_langchain_tool_call_through_the_responses_api(w: World) -> None:
    @tool
    def get_weather(city: str) -> str:
        """The weather in a city."""
        return "sunny"

    chat = ChatOpenAI(
        model="fake",
        base_url=w.server.url + "/v1",
        api_key=w.token(w.ann),  # type: ignore[arg-type]
        max_retries=0,
        use_responses_api=True,
        use_previous_response_id=True,
    ).bind_tools([get_weather])
    w.model.tool_call("get_weather", {"city": "Oslo"}, id="call_lc")
    asked = HumanMessage("Weather in Oslo?")
    called = chat.invoke([asked])
    assert [(c["name"], c["args"], c["id"]) for c in called.tool_calls] == [  # type: ignore[attr-defined]
        ("get_weather", {"city": "Oslo"}, "call_lc")
    ]
    result = get_weather.invoke(called.tool_calls[0])  # type: ignore[attr-defined]
    w.model.reply("Sunny in Oslo.")
    final = chat.invoke([asked, called, result])
    assert final.text == "Sunny in Oslo."
    sent = w.model.chat_requests[-1].messages
    assert roles(sent) == ["user", "assistant", "tool"]


def test_a_reasoning_models_thinking_is_a_reasoning_item(w: World) -> None:
    w.model.reply("Four.", reasoning="Two plus two is four.")
    with w.sdk().responses.stream(model="fake", input="2+2?") as stream:
        events = list(stream)
        final = stream.get_final_response()
    kinds = [e.type for e in events]
    assert kinds.index("response.reasoning_text.delta") < kinds.index("response.output_text.delta")
    thought = "".join(e.delta for e in events if e.type == "response.reasoning_text.delta")
    assert thought == "Two plus two is four."
    assert [item.type for item in final.output] == ["reasoning", "message"]
    reasoning = final.output[0]
    assert reasoning.type == "reasoning" and reasoning.content is not None
    assert reasoning.content[0].text == "Two plus two is four."
    assert final.output_text == "Four."
    again = w.sdk().responses.retrieve(final.id)  # read back from the run's events
    assert [item.id for item in again.output] == [item.id for item in final.output]
    assert again.output[0].model_dump() == reasoning.model_dump()
    assert again.output_text == "Four."


def test_a_failure_mid_answer_is_response_failed(w: World) -> None:
    w.model.reply("one two three four five six", break_after=2)
    events = list(w.sdk().responses.create(model="fake", input="Count", stream=True))
    last = events[-1]
    assert last.type == "response.failed"
    assert last.response.status == "failed"
    assert last.response.error is not None and last.response.error.code
    assert w.sdk().responses.retrieve(last.response.id).status == "failed"


def test_a_request_that_cannot_fit_is_context_length_exceeded(w: World) -> None:
    huge = "word " * 9000
    for stream in (False, True):
        with pytest.raises(openai.BadRequestError) as caught:
            w.sdk().responses.create(model="fake", input=huge, stream=stream)
        assert caught.value.code == "context_length_exceeded"
    assert w.model.chat_requests == []


def test_known_fields_are_checked_and_unknown_ones_ignored(w: World) -> None:
    client = w.sdk()
    bad: list[dict[str, Any]] = [
        {"temperature": 5},
        {"background": True},
        {"previous_response_id": "resp_x", "conversation": "c"},
        {"tool_choice": {"type": "function", "name": "nope"}},
        {"text": {"format": {"type": "json_schema"}}},
        {"input": [{"type": "item_reference", "id": "msg_1"}]},
        {"input": [{"type": "message", "id": {"x": 1}, "role": "user", "content": [{}]}]},
        {"input": [{"type": "function_call_output", "call_id": "c", "output": [{"text": 1}]}]},
        {"tools": [{"type": "function"}]},
    ]
    for fields in bad:
        body = {"model": "fake", "input": "Hi", **fields}
        with pytest.raises(openai.BadRequestError):
            client.post("/responses", body=body, cast_to=dict)
    w.model.reply(DEFAULT_REPLY)
    answered = client.responses.create(
        model="fake",
        input="Hi",
        extra_body={"some_future_field": {"x": 1}},
        include=["reasoning.encrypted_content"],
        truncation="auto",
    )
    assert answered.output_text == DEFAULT_REPLY
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve("resp_unknown")


def test_usage_details_are_the_providers(w: World) -> None:
    w.model.reply("Cached.", usage=(90, 8, 64, 5))
    usage = w.sdk().responses.create(model="fake", input="Again").usage
    assert usage is not None
    assert (usage.input_tokens, usage.output_tokens, usage.total_tokens) == (90, 8, 98)
    assert usage.input_tokens_details.cached_tokens == 64
    assert usage.output_tokens_details.reasoning_tokens == 5


def test_the_whole_history_without_ids_continues_one_conversation(w: World) -> None:
    """As Codex sends it: instructions and the whole history each time, no ids (the history
    index finds the conversation, API-1)."""
    client = w.sdk()
    history: list[dict[str, Any]] = []
    conversations = set()
    for i in range(3):
        history.append({"role": "user", "content": f"Step {i} of the plan, please."})
        w.model.reply(f"Done with step {i}.")
        raw = client.responses.with_raw_response.create(
            model="fake",
            instructions="You are Codex.",
            input=history,  # type: ignore[arg-type]
        )
        conversations.add(raw.headers[HEADER])
        history.append({"role": "assistant", "content": raw.parse().output_text})
    assert len(conversations) == 1
    stored = w.stored(conversations.pop())
    assert [m["content"] for m in stored][:3] == [
        "You are Codex.",
        "Step 0 of the plan, please.",
        "Done with step 0.",
    ]
    assert len(stored) == 7  # the instructions once, each message once
