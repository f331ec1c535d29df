"""PROV-1, PROV-2, PROV-5 at the client: what real OpenAI-compatible servers do differently.

Each behaviour is reproduced by the fake model server over real HTTP: a stream without usage
(llama.cpp), a server that refuses ``stream_options``, an empty HTTP 200 stream, the
context-length errors of OpenAI, vLLM, llama.cpp, Ollama and LM Studio with the token count
they name, and an answer larger than the bound.
"""

from __future__ import annotations

import pytest
from tests.models.test_client import PRIVATE_OK, client_for, collect
from tests.support.model_server import CONTEXT_ERRORS, TOOLS_REFUSALS, FakeModelServer

from chatmem.errors import (
    AnswerTooLarge,
    ProviderContextLength,
    ProviderEmptyStream,
    ProviderError,
    ProviderRefusesTools,
)
from chatmem.models.pool import SharedHttp, http_pool
from chatmem.models.refusals import requested_tokens
from chatmem.models.stream import Finish, ReasoningDelta, TextDelta, ToolCallEvent, Usage


async def test_a_stream_without_usage_yields_no_usage_event_PROV_1(
    model_server: FakeModelServer,
) -> None:
    model_server.reply("Hello there", report_usage=False)
    async with client_for(model_server) as client:
        events = await collect(client)
    assert not any(isinstance(e, Usage) for e in events)
    assert isinstance(events[-1], Finish) and events[-1].reason == "stop"
    # It was asked for.
    assert model_server.chat_requests[0].body["stream_options"] == {"include_usage": True}


async def test_a_server_refusing_stream_options_is_asked_again_without_it_PROV_1(
    model_server: FakeModelServer,
) -> None:
    model_server.reject_field("stream_options")
    model_server.reply("First", report_usage=False)
    model_server.reply("Second", report_usage=False)
    # The app's clients for one base URL share its pool (``ModelClients``): what one learnt
    # about the server, the next one knows.
    pool = SharedHttp(http_pool(PRIVATE_OK, timeout=10))
    try:
        async with client_for(model_server, shared=pool) as client:
            first = await collect(client)
            assert client.asks_usage is False
        async with client_for(model_server, shared=pool) as client:
            assert client.asks_usage is False
            second = await collect(client)
    finally:
        await pool.retire()
    assert [e.text for e in first if isinstance(e, TextDelta)] == ["First"]
    assert [e.text for e in second if isinstance(e, TextDelta)] == ["Second"]
    sent = [r.body for r in model_server.chat_requests]
    assert len(sent) == 3
    assert "stream_options" in sent[0]
    assert "stream_options" not in sent[1] and "stream_options" not in sent[2]
    # The knowledge is the pool's, not the process's: a client of its own asks again.
    async with client_for(model_server) as client:
        assert client.asks_usage is True


async def test_a_400_about_something_else_is_not_taken_for_stream_options(
    model_server: FakeModelServer,
) -> None:
    model_server.error(400, {"error": {"message": "unknown parameter foo"}})
    async with client_for(model_server) as client:
        with pytest.raises(Exception, match="unknown parameter foo"):
            await collect(client)
        assert client.asks_usage is True
    assert len(model_server.chat_requests) == 1


@pytest.mark.parametrize("done", [True, False])
async def test_an_empty_200_stream_is_recognised_PROV_2(
    model_server: FakeModelServer, done: bool
) -> None:
    model_server.empty_stream(done=done)
    async with client_for(model_server) as client:
        with pytest.raises(ProviderEmptyStream):
            await collect(client)
    assert len(model_server.chat_requests) == 1  # not retried: the probe decides


async def test_the_probe_learns_llama_cpps_context_error_PROV_2(
    model_server: FakeModelServer,
) -> None:
    model_server.limit_context(100, style="llama_cpp")
    messages = [{"role": "user", "content": "7" * 500}]
    async with client_for(model_server) as client:
        with pytest.raises(ProviderEmptyStream):
            async for _ in client.stream(messages):
                pass
        with pytest.raises(ProviderContextLength) as info:
            await client.probe(messages)
    assert info.value.requested_tokens == 504 and info.value.window == 100
    probe = model_server.chat_requests[-1].body
    assert probe["stream"] is False and probe["max_tokens"] == 1
    assert probe["messages"] == messages


async def test_a_probe_that_is_answered_returns_its_usage(model_server: FakeModelServer) -> None:
    model_server.reply("x", usage=(321, 1))
    async with client_for(model_server) as client:
        usage = await client.probe([{"role": "user", "content": "hi"}])
    assert usage == Usage(321, 1)


@pytest.mark.parametrize("style", sorted(set(CONTEXT_ERRORS) - {"ollama_plain"}))
async def test_each_servers_context_error_names_its_token_count_PROV_2(
    model_server: FakeModelServer, style: str
) -> None:
    model_server.context_length_error(style, tokens=11251, window=8192)
    async with client_for(model_server) as client:
        with pytest.raises(ProviderContextLength) as info:
            await collect(client)
    assert info.value.requested_tokens == 11251
    assert info.value.window == 8192
    assert "Economy" in info.value.message


async def test_a_context_error_without_a_count_is_still_recognised(
    model_server: FakeModelServer,
) -> None:
    model_server.context_length_error("ollama_plain")
    async with client_for(model_server) as client:
        with pytest.raises(ProviderContextLength) as info:
            await collect(client)
    assert info.value.requested_tokens is None


@pytest.mark.parametrize(
    ("message", "tokens", "window"),
    [
        ("Requested tokens (11251) exceed context window of 8192", 11251, 8192),
        (
            "This model's maximum context length is 8192 tokens. However, your messages "
            "resulted in 11251 tokens. Please reduce the length of the messages.",
            11251,
            8192,
        ),
        (
            "This model's maximum context length is 8192 tokens. However, you requested 12251 "
            "tokens (11251 in the messages, 1000 in the completion). Please reduce the length "
            "of the messages or completion.",
            11251,
            8192,
        ),
        (
            "This model's maximum context length is 8,192 tokens. However, your request has "
            "11,251 input tokens.",
            11251,
            8192,
        ),
        ("prompt is too long: 211251 tokens > 200000 maximum", 211251, 200000),
        ("input length exceeds the context length: prompt=11251 limit=8192", 11251, 8192),
        ("Input length 11251 exceeds context length 8192", 11251, 8192),
        ("prompt too long; exceeded max context length by 3059 tokens", None, None),
        ("the input length exceeds the context length", None, None),
    ],
)
def test_token_counts_in_provider_wordings(
    message: str, tokens: int | None, window: int | None
) -> None:
    assert requested_tokens(message) == (tokens, window)


def test_ollamas_excess_form_adds_to_the_window_it_names() -> None:
    payload = {"error": {"message": "exceeded max context length by 3059 tokens", "n_ctx": 8192}}
    assert requested_tokens(payload["error"]["message"], payload) == (11251, 8192)


async def test_an_answer_past_the_bound_is_cut_at_the_bound_PROV_5(
    model_server: FakeModelServer,
) -> None:
    model_server.large_reply(50_000, piece="é" * 700)  # 2-byte characters: cut between them
    received: list[str] = []
    async with client_for(model_server, max_answer_bytes=10_001) as client:
        with pytest.raises(AnswerTooLarge) as info:
            async for event in client.stream([{"role": "user", "content": "hi"}]):
                if isinstance(event, TextDelta):
                    received.append(event.text)
    text = "".join(received)
    assert len(text.encode()) == 10_000 and set(text) == {"é"}
    assert info.value.code == "answer_too_large"
    assert "10 KB" in info.value.message or "9.767 KB" in info.value.message


async def test_tool_call_arguments_count_toward_the_bound_PROV_5(
    model_server: FakeModelServer,
) -> None:
    model_server.tool_call("search", {"q": "x" * 20_000})
    async with client_for(model_server, max_answer_bytes=4_096) as client:
        with pytest.raises(AnswerTooLarge):
            await collect(client)


async def test_a_single_huge_line_is_refused_without_being_held_PROV_5(
    model_server: FakeModelServer,
) -> None:
    model_server.reply("x" * 200_000, chunks=["x" * 200_000])
    async with client_for(model_server, max_answer_bytes=1_024) as client:
        with pytest.raises(AnswerTooLarge):
            await collect(client)


async def test_an_answer_within_the_bound_is_untouched(model_server: FakeModelServer) -> None:
    model_server.large_reply(9_000)
    async with client_for(model_server, max_answer_bytes=9_000) as client:
        events = await collect(client)
    assert sum(len(e.text) for e in events if isinstance(e, TextDelta)) == 9_000


TOOL = {"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}


@pytest.mark.parametrize("style", sorted(TOOLS_REFUSALS))
async def test_a_server_without_tool_calling_refuses_tools_in_its_words(
    model_server: FakeModelServer, style: str
) -> None:
    """Ollama, vLLM and llama.cpp (a 500, not retried) each refuse a request offering tools:
    the error says so, for the turn to decide (it drops recall when nobody chose it)."""
    model_server.refuse_tools(style)
    async with client_for(model_server) as client:
        with pytest.raises(ProviderRefusesTools) as refused:
            await collect(client, tools=[TOOL])
        assert [e.text for e in await collect(client) if isinstance(e, TextDelta)]
    assert len(model_server.chat_requests) == 2  # one refusal, one answer without tools
    assert "turn the tools off" in refused.value.message


@pytest.mark.parametrize(
    "message",
    [
        "Invalid schema for function 'lookup': 'required' is required to be supplied",
        "Invalid 'tools[0].function.name': a name is required",
        "Unrecognized request argument supplied: parallel_tool_calls",
    ],
)
async def test_other_refusals_of_a_request_with_tools_stay_what_they_are(
    model_server: FakeModelServer, message: str
) -> None:
    model_server.error(400, {"error": {"message": message, "type": "invalid_request_error"}})
    async with client_for(model_server) as client:
        with pytest.raises(ProviderError) as failed:
            await collect(client, tools=[TOOL])
    assert not isinstance(failed.value, ProviderRefusesTools)
    assert message in failed.value.message


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
async def test_a_reasoning_models_thinking_is_reasoning_not_text(
    model_server: FakeModelServer, field: str
) -> None:
    """DeepSeek, llama.cpp and vLLM send the thinking as ``reasoning_content``, Ollama and
    OpenRouter as ``reasoning``: either way it comes first, and it is not the answer."""
    model_server.reply("Paris.", reasoning="The capital of France is Paris.", reasoning_field=field)
    async with client_for(model_server) as client:
        events = await collect(client)
    thinking = [e.text for e in events if isinstance(e, ReasoningDelta)]
    assert "".join(thinking) == "The capital of France is Paris."
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "Paris."
    kinds = [type(e).__name__ for e in events]
    assert kinds.index("TextDelta") == len(thinking)  # all the thinking first


@pytest.mark.parametrize(
    "chunks",
    [
        ["<think>", "Let me see.", "</think>", "\n\nParis."],
        ["<th", "ink>Let me", " see.</thi", "nk>\n", "\nParis."],  # tags cut anywhere
        ["\n<think>Let me see.</think>Paris."],
    ],
)
async def test_an_answer_opening_with_a_think_block_is_split(
    model_server: FakeModelServer, chunks: list[str]
) -> None:
    """Qwen3 or DeepSeek-R1 on a server that leaves the thinking in the text."""
    model_server.reply("", chunks=chunks)
    async with client_for(model_server) as client:
        events = await collect(client)
        model_server.reply("", chunks=chunks)
        summary = await client.complete([{"role": "user", "content": "Summarise"}])
    assert "".join(e.text for e in events if isinstance(e, ReasoningDelta)) == "Let me see."
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "Paris."
    assert summary.text == "Paris."  # a summary never holds the summariser's thinking


@pytest.mark.parametrize(
    "text",
    ["The <think> tag opens a block.", "<b>bold</b>", "  <thinking> is not it", "<think"],
)
async def test_an_answer_that_does_not_open_with_the_tag_is_left_alone(
    model_server: FakeModelServer, text: str
) -> None:
    model_server.reply(text, chunks=[text[:3], text[3:]])
    async with client_for(model_server) as client:
        events = await collect(client)
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == text
    assert not any(isinstance(e, ReasoningDelta) for e in events)


async def test_tool_calls_sent_whole_without_an_index_stay_apart(
    model_server: FakeModelServer,
) -> None:
    """Gemini's OpenAI-compatible API sends each call whole and without ``index``: two
    parallel calls used to merge into one (the first name, both arguments run together)."""
    model_server.tool_calls(
        [("weather", {"city": "Rome"}, "c1"), ("time", {"zone": "CET"}, "c2")], whole=True
    )
    async with client_for(model_server) as client:
        events = await collect(client, tools=[TOOL])
    calls = [e.call for e in events if isinstance(e, ToolCallEvent)]
    assert [(c.id, c.name, c.arguments) for c in calls] == [
        ("c1", "weather", '{"city": "Rome"}'),
        ("c2", "time", '{"zone": "CET"}'),
    ]


HISTORY = [
    {"role": "user", "content": "Weather?"},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {
                "id": "call_Zx81kQ2mP0aB3cD4",  # made by another provider
                "type": "function",
                "function": {"name": "weather", "arguments": "{}"},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "call_Zx81kQ2mP0aB3cD4", "content": "Sunny"},
    {"role": "user", "content": "Thanks. And tomorrow?"},
]


async def test_a_server_wanting_short_tool_call_ids_gets_them(
    model_server: FakeModelServer,
) -> None:
    """Mistral refuses any tool call id that is not 9 letters and digits: a conversation
    whose tools ran under another model could not go on with a Mistral model at all."""
    model_server.short_tool_call_ids()
    model_server.reply("Rain tomorrow.")
    model_server.reply("Then sun.")
    pool = SharedHttp(http_pool(PRIVATE_OK, timeout=10))
    try:
        async with client_for(model_server, shared=pool) as client:
            first = [e async for e in client.stream(HISTORY, tools=[TOOL])]
            second = [e async for e in client.stream(HISTORY, tools=[TOOL])]
    finally:
        await pool.retire()
    assert [e.text for e in first + second if isinstance(e, TextDelta)] == [
        "Rain",
        " tomorrow.",
        "Then",
        " sun.",
    ]
    sent = [r.body["messages"] for r in model_server.chat_requests]
    assert len(sent) == 3  # refused once, then asked in the server's form from then on
    for messages in sent[1:]:
        call_id = messages[1]["tool_calls"][0]["id"]
        assert len(call_id) == 9 and call_id.isalnum()
        assert messages[2]["tool_call_id"] == call_id  # the call and its result still match
    assert sent[1] == sent[2]
    assert HISTORY[1]["tool_calls"][0]["id"] == "call_Zx81kQ2mP0aB3cD4"  # not changed in place
