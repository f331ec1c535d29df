"""Issue 29, section 2: nothing a client sends to ``/v1/chat/completions`` is silently
dropped — the request parameters reach the provider as given (the fake provider's recorded
requests show them), a model profile's defaults and pins apply to every turn, image parts
are stored and counted, usage details come back, and what cannot be honoured is a 400.

Driven by the real clients (the ``openai`` SDK, LangChain's ``ChatOpenAI``) against a real
``chatmem serve`` and the fake provider in this process."""

from __future__ import annotations

import base64
import io
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from PIL import Image
from pydantic import BaseModel
from tests.support.model_server import FakeModelServer
from tests.support.openai_world import OpenAIWorld, fresh, serve
from tests.support.serve import ServeProcess

pytestmark = pytest.mark.slow

WINDOW = 8192
RESERVE = 1024
HEADER = "X-Chatmem-Conversation"
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}


class World(OpenAIWorld):
    def __init__(self, server: ServeProcess, model: FakeModelServer) -> None:
        super().__init__(server, model)
        self.ann = server.signed_in("ann")
        self.default = self.ann
        self.profile_id = self.profile("fake")
        self.vision_id = self.profile("vision", accepts_images=True)

    def profile(self, name: str, **fields: Any) -> str:
        return self.add_profile(
            self.ann,
            name,
            model=f"{name}-model",
            context_window=WINDOW,
            answer_reserve=RESERVE,
            tokenizer="o200k_base",
            **fields,
        )

    def langchain(self, **kw: Any) -> ChatOpenAI:
        return ChatOpenAI(
            model="fake",
            base_url=self.server.url + "/v1",
            api_key=self.token(),  # type: ignore[arg-type]
            max_retries=0,
            **kw,
        )

    def post(self, body: dict[str, Any]) -> httpx.Response:
        return httpx.post(
            self.server.url + "/v1/chat/completions",
            headers={"Authorization": f"Bearer {self.token()}"},
            json={"model": "fake", "messages": [{"role": "user", "content": "hi"}], **body},
            timeout=30,
        )

    @property
    def sent(self) -> dict[str, Any]:
        """The body of the last request the provider received."""
        return dict(self.model.chat_requests[-1].body)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    yield from serve(tmp_path_factory, "serve-openai-params", World)


@pytest.fixture
def w(world: World) -> Iterator[World]:
    yield from fresh(world)


PARAMETERS: dict[str, Any] = {
    "temperature": 0.3,
    "top_p": 0.9,
    "max_tokens": 200,
    "stop": ["\n\n", "END"],
    "seed": 42,
    "presence_penalty": 0.5,
    "frequency_penalty": -0.5,
    "response_format": {"type": "json_object"},
    "reasoning_effort": "low",
    "logit_bias": {"1234": -100},
}


@pytest.mark.parametrize("stream", [False, True])
def test_each_parameter_reaches_the_provider_as_given(w: World, stream: bool) -> None:
    w.model.reply('{"ok": true}')
    answer = w.sdk().chat.completions.create(
        model="fake",
        messages=[{"role": "user", "content": "Answer in JSON"}],
        stream=stream,
        **PARAMETERS,
    )
    if stream:
        assert "".join(c.choices[0].delta.content or "" for c in answer if c.choices)  # type: ignore[union-attr]
    sent = w.sent
    assert {k: sent.get(k) for k in PARAMETERS} == PARAMETERS
    assert sent["messages"][-1] == {"role": "user", "content": "Answer in JSON"}


def test_max_completion_tokens_and_tool_parameters(w: World) -> None:
    w.model.reply("No tool needed.")
    w.sdk().chat.completions.create(
        model="fake",
        messages=[{"role": "user", "content": "hello"}],
        tools=[WEATHER],  # type: ignore[list-item]
        tool_choice="none",
        parallel_tool_calls=False,
        max_completion_tokens=100,
    )
    sent = w.sent
    # "none" is passed as given, with the client's tools still offered.
    assert sent["tool_choice"] == "none"
    assert sent["parallel_tool_calls"] is False
    assert sent["max_completion_tokens"] == 100 and "max_tokens" not in sent
    assert "get_weather" in [t["function"]["name"] for t in sent["tools"]]


def test_a_named_tool_choice_forces_that_call(w: World) -> None:
    w.model.tool_call("get_weather", {"city": "Oslo"}, id="call_1")
    choice = {"type": "function", "function": {"name": "get_weather"}}
    completion = w.sdk().chat.completions.create(
        model="fake",
        messages=[{"role": "user", "content": "Oslo?"}],
        tools=[WEATHER],  # type: ignore[list-item]
        tool_choice=choice,  # type: ignore[arg-type]
    )
    assert completion.choices[0].finish_reason == "tool_calls"
    assert w.sent["tool_choice"] == choice


class Capital(BaseModel):
    city: str
    country: str


def test_sdk_parse_with_a_pydantic_model(w: World) -> None:
    w.model.reply('{"city": "Paris", "country": "France"}')
    completion = w.sdk().chat.completions.parse(
        model="fake",
        messages=[{"role": "user", "content": "Capital of France?"}],
        response_format=Capital,
    )
    assert completion.choices[0].message.parsed == Capital(city="Paris", country="France")
    sent = w.sent["response_format"]
    assert sent["type"] == "json_schema"
    assert sent["json_schema"]["name"] == "Capital" and sent["json_schema"]["strict"] is True
    assert set(sent["json_schema"]["schema"]["properties"]) == {"city", "country"}


def test_langchain_structured_output_default_method(w: World) -> None:
    w.model.reply('{"city": "Rome", "country": "Italy"}')
    structured = w.langchain().with_structured_output(Capital)
    assert structured.invoke("Capital of Italy?") == Capital(city="Rome", country="Italy")
    sent = w.sent["response_format"]
    assert sent["type"] == "json_schema" and sent["json_schema"]["name"] == "Capital"


def test_langchain_bind_tools_with_a_forced_tool_choice(w: World) -> None:
    @tool
    def get_weather(city: str) -> str:
        """The weather in a city."""
        return "sunny"

    w.model.tool_call("get_weather", {"city": "Oslo"}, id="call_lc")
    bound = w.langchain(temperature=0.1).bind_tools([get_weather], tool_choice="get_weather")
    answer = bound.invoke("Weather in Oslo?")
    assert answer.tool_calls[0]["name"] == "get_weather"  # type: ignore[attr-defined]
    sent = w.sent
    assert sent["tool_choice"] == {"type": "function", "function": {"name": "get_weather"}}
    assert sent["temperature"] == 0.1


REFUSED: list[tuple[dict[str, Any], str]] = [
    ({"n": 2}, "n"),
    ({"temperature": 2.5}, "temperature"),
    ({"top_p": -0.1}, "top_p"),
    ({"max_tokens": 0}, "max_tokens"),
    ({"seed": "7"}, "seed"),
    ({"presence_penalty": 3}, "presence_penalty"),
    ({"stop": ["a", "b", "c", "d", "e"]}, "stop"),
    ({"response_format": {"type": "xml"}}, "response_format"),
    ({"response_format": {"type": "json_schema"}}, "response_format"),
    ({"reasoning_effort": "max"}, "reasoning_effort"),
    ({"parallel_tool_calls": "yes"}, "parallel_tool_calls"),
    ({"tool_choice": "sometimes"}, "tool_choice"),
    ({"tool_choice": "required"}, "tool_choice"),  # no tools offered
    (
        {"tools": [WEATHER], "tool_choice": {"type": "function", "function": {"name": "other"}}},
        "tool_choice",
    ),
    ({"logprobs": True}, "logprobs"),
    ({"top_logprobs": 3}, "top_logprobs"),
    ({"audio": {"voice": "alloy", "format": "mp3"}}, "audio"),
    ({"modalities": ["text", "audio"]}, "modalities"),
    ({"prediction": {"type": "content", "content": "x"}}, "prediction"),
    ({"web_search_options": {}}, "web_search_options"),
    ({"functions": [WEATHER["function"]]}, "functions"),
]


@pytest.mark.parametrize(("body", "param"), REFUSED, ids=[p for _, p in REFUSED])
def test_what_cannot_be_honoured_is_a_400(w: World, body: dict[str, Any], param: str) -> None:
    response = w.post(body)
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["type"] == "invalid_request_error"
    assert param in error["message"]
    assert w.model.chat_requests == []  # never sent


def test_the_sdk_raises_bad_request_for_a_refusal(w: World) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        w.sdk().chat.completions.create(
            model="fake", messages=[{"role": "user", "content": "x"}], logprobs=True
        )
    assert caught.value.param == "logprobs"
    assert "log probabilities" in caught.value.message


def test_false_or_text_only_values_of_refused_fields_pass(w: World) -> None:
    response = w.post({"logprobs": False, "modalities": ["text"], "n": 1})
    assert response.status_code == 200, response.text
    assert w.sent["logprobs"] is False
    assert "modalities" not in w.sent


# -- max_tokens and the plan's answer reserve ------------------------------------------------


def test_max_tokens_above_the_reserve_is_reserved_by_the_plan(w: World) -> None:
    # About 6,000 tokens: fits beside the profile's reserve of 1,024 in the 8,192 window,
    # not beside an answer of 3,000 tokens.
    long = "word " * 6000
    ok = w.post({"messages": [{"role": "user", "content": long}], "max_tokens": 1000})
    assert ok.status_code == 200, ok.text
    assert w.sent["max_tokens"] == 1000
    w.model.reset()
    too_big = w.post({"messages": [{"role": "user", "content": long}], "max_tokens": 3000})
    assert too_big.status_code == 400, too_big.text
    assert too_big.json()["error"]["code"] == "context_length_exceeded"
    assert w.model.chat_requests == []


# -- profile defaults and pins --------------------------------------------------------------


def test_profile_defaults_and_pins_apply_to_every_turn(w: World) -> None:
    pid = w.profile(
        "pinned",
        request_defaults={"temperature": 0.2, "seed": 7},
        request_pins={"max_tokens": 300, "response_format": {"type": "json_object"}},
    )
    try:
        shown = w.ann.get(f"/api/v1/profiles/{pid}").json()
        assert shown["request_defaults"] == {"temperature": 0.2, "seed": 7}
        assert shown["request_pins"]["max_tokens"] == 300
        w.model.reply("{}")
        w.sdk().chat.completions.create(
            model="pinned",
            messages=[{"role": "user", "content": "hi"}],
            temperature=0.9,  # the client's value beats a default
            max_completion_tokens=900,  # ... a pin beats the client's value
            response_format={"type": "text"},
        )
        sent = w.sent
        assert sent["temperature"] == 0.9 and sent["seed"] == 7
        assert sent["max_tokens"] == 300 and "max_completion_tokens" not in sent
        assert sent["response_format"] == {"type": "json_object"}
        # A turn from the UI (the chatmem API) gets them too.
        conversation = w.ann.post("/api/v1/conversations", json={"profile_id": pid}).json()
        w.model.reply("{}")
        run = w.ann.post(
            f"/api/v1/conversations/{conversation['id']}/turns", json={"content": "hello"}
        ).json()
        events = w.ann.get(f"/api/v1/runs/{run['run_id']}/events", timeout=30)
        assert "event: done" in events.text
        sent = w.sent
        assert (sent["temperature"], sent["seed"], sent["max_tokens"]) == (0.2, 7, 300)
        # A PATCH changes them (null: none).
        changed = w.ann.patch(f"/api/v1/profiles/{pid}", json={"request_pins": None})
        assert changed.status_code == 200, changed.text
        assert changed.json()["request_pins"] == {}
        assert changed.json()["request_defaults"] == {"temperature": 0.2, "seed": 7}
    finally:
        w.ann.delete(f"/api/v1/profiles/{pid}")


@pytest.mark.parametrize(
    ("field", "value", "said"),
    [
        ("request_defaults", {"temperature": 5}, "temperature"),
        ("request_pins", {"colour": "blue"}, "unknown parameters colour"),
        (
            "request_pins",
            {"tool_choice": {"type": "function", "function": {"name": "x"}}},
            "tool_choice",
        ),
        ("request_defaults", {"logprobs": True}, "log probabilities"),
        ("request_defaults", ["temperature"], "request_defaults"),
    ],
)
def test_profile_request_parameters_are_checked(
    w: World, field: str, value: Any, said: str
) -> None:
    response = w.ann.patch(f"/api/v1/profiles/{w.profile_id}", json={field: value})
    assert response.status_code in (400, 422), response.text
    error = response.json()["error"]
    assert error["code"] == "invalid_input" and said in error["message"]
    assert w.ann.get(f"/api/v1/profiles/{w.profile_id}").json()[field] == {}


# -- usage details ---------------------------------------------------------------------------


def test_usage_details_when_the_provider_reports_them(w: World) -> None:
    w.model.reply("Thought about it.", usage=(90, 8, 64, 5))
    completion = w.sdk().chat.completions.create(
        model="fake", messages=[{"role": "user", "content": "think"}]
    )
    usage = completion.usage
    assert usage is not None and (usage.prompt_tokens, usage.completion_tokens) == (90, 8)
    assert usage.prompt_tokens_details is not None
    assert usage.prompt_tokens_details.cached_tokens == 64
    assert usage.completion_tokens_details is not None
    assert usage.completion_tokens_details.reasoning_tokens == 5
    w.model.reply("Streamed.", usage=(50, 3, 32, 2))
    chunks = list(
        w.sdk().chat.completions.create(
            model="fake",
            messages=[{"role": "user", "content": "stream"}],
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    last = chunks[-1].usage
    assert last is not None and last.prompt_tokens_details is not None
    assert last.prompt_tokens_details.cached_tokens == 32
    assert last.completion_tokens_details is not None
    assert last.completion_tokens_details.reasoning_tokens == 2


def test_no_usage_details_when_the_provider_reports_none(w: World) -> None:
    w.model.reply("Plain.", usage=(10, 2))
    body = w.post({}).json()
    assert body["usage"] == {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12}


# -- images ----------------------------------------------------------------------------------


def png_data_url(size: tuple[int, int] = (64, 48)) -> str:
    buffer = io.BytesIO()
    Image.new("RGB", size, (200, 30, 30)).save(buffer, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def image_message(url: str, text: str = "What is in this picture?") -> dict[str, Any]:
    return {
        "role": "user",
        "content": [
            {"type": "text", "text": text},
            {"type": "image_url", "image_url": {"url": url, "detail": "low"}},
        ],
    }


def conversation_count(w: World) -> int:
    return len(w.ann.get("/api/v1/conversations").json()["items"])


def test_an_image_part_is_stored_sent_and_counted(w: World) -> None:
    url = png_data_url()
    w.model.reply("A red rectangle.")
    raw = w.sdk().chat.completions.with_raw_response.create(
        model="vision",
        messages=[image_message(url)],  # type: ignore[list-item]
    )
    assert raw.parse().choices[0].message.content == "A red rectangle."
    conversation_id = raw.headers[HEADER]
    # The provider got the image as an image part, its bytes as sent.
    parts = w.sent["messages"][-1]["content"]
    assert parts[0] == {"type": "text", "text": "What is in this picture?"}
    assert [p["image_url"]["url"] for p in parts if p["type"] == "image_url"] == [url]
    # Stored as the UI's attachments: the message's text, the image a file of it.
    stored = w.ann.get(f"/api/v1/conversations/{conversation_id}/messages").json()["items"]
    assert stored[0]["content"] == "What is in this picture?"
    plan = w.ann.get(f"/api/v1/conversations/{conversation_id}/context").json()
    assert plan["tokens"]["images"] > 0
    assert [state for state in plan["files"].values()] == ["in_memory"]
    # The client sends the history again with the image: matched, not stored twice.
    w.model.reply("Still red.")
    w.sdk().chat.completions.create(
        model="vision",
        messages=[  # type: ignore[list-item]
            image_message(url),
            {"role": "assistant", "content": "A red rectangle."},
            {"role": "user", "content": "Sure?"},
        ],
        extra_headers={HEADER: conversation_id},
    )
    again = w.ann.get(f"/api/v1/conversations/{conversation_id}/context").json()
    assert len(again["files"]) == 1
    assert len(w.ann.get(f"/api/v1/conversations/{conversation_id}/messages").json()["items"]) == 4


def test_a_text_only_profile_refuses_images(w: World) -> None:
    before = conversation_count(w)
    with pytest.raises(openai.BadRequestError) as caught:
        w.sdk().chat.completions.create(
            model="fake",
            messages=[image_message(png_data_url())],  # type: ignore[list-item]
        )
    assert "takes no images" in caught.value.message
    assert w.model.chat_requests == [] and conversation_count(w) == before


@pytest.mark.parametrize(
    ("url", "said"),
    [
        ("https://example.com/cat.png", "not fetched"),
        ("data:image/png;base64,@@@not-base64@@@", "not valid base64"),
        ("data:text/plain;base64,aGVsbG8=", "not an image"),
        ("data:image/png;base64," + base64.b64encode(b"not a png at all").decode(), "image"),
        ("ftp://example.com/x.png", "data URL"),
    ],
)
def test_bad_image_urls_are_a_400(w: World, url: str, said: str) -> None:
    before = conversation_count(w)
    response = w.post({"model": "vision", "messages": [image_message(url)]})
    assert response.status_code == 400, response.text
    assert said in response.json()["error"]["message"]
    assert w.model.chat_requests == [] and conversation_count(w) == before
