"""PROF-5: the streaming Chat Completions client against the fake model server."""

from __future__ import annotations

import json
import logging

import pytest
from tests.support.model_server import FakeModelServer

from chatmem.context.values import ToolCall
from chatmem.errors import (
    EndpointNotAllowed,
    ProviderAuthError,
    ProviderContextLength,
    ProviderError,
    ProviderRateLimited,
    ProviderUnreachable,
)
from chatmem.models.client import ModelClient, ModelEndpoint, RetryPolicy
from chatmem.models.stream import Finish, TextDelta, ToolCallEvent, Usage
from chatmem.security.endpoints import EndpointPolicy, StaticResolver

KEY = "sk-test-SECRET-0123456789abcdef"
PRIVATE_OK = EndpointPolicy(allow_private=True)


class Sleeps:
    def __init__(self) -> None:
        self.calls: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.calls.append(seconds)


def client_for(server: FakeModelServer, **kwargs: object) -> ModelClient:
    kwargs.setdefault("sleep", Sleeps())
    return ModelClient(
        ModelEndpoint(server.base_url, "fake-model", KEY),
        PRIVATE_OK,
        **kwargs,  # type: ignore[arg-type]
    )


async def collect(client: ModelClient, **kwargs: object) -> list[object]:
    return [e async for e in client.stream([{"role": "user", "content": "hi"}], **kwargs)]  # type: ignore[arg-type]


async def test_text_streams_as_deltas_then_usage_then_finish(model_server: FakeModelServer) -> None:
    model_server.reply("Hello there, friend", usage=(12, 3))
    async with client_for(model_server) as client:
        events = await collect(client)
    texts = [e.text for e in events if isinstance(e, TextDelta)]
    assert len(texts) == 3 and "".join(texts) == "Hello there, friend"
    assert events[-2:] == [Usage(12, 3), Finish("stop")]


async def test_request_is_openai_shaped_with_include_usage_and_bearer_key(
    model_server: FakeModelServer,
) -> None:
    tools = [{"type": "function", "function": {"name": "search", "parameters": {"type": "object"}}}]
    async with client_for(model_server) as client:
        await collect(client, tools=tools, max_tokens=100)
    (request,) = model_server.chat_requests
    assert request.path == "/v1/chat/completions"
    assert request.headers["authorization"] == f"Bearer {KEY}"
    assert request.body == {
        "model": "fake-model",
        "messages": [{"role": "user", "content": "hi"}],
        "stream": True,
        "stream_options": {"include_usage": True},
        "tools": tools,
        "max_tokens": 100,
    }
    # PROF-2: the key travels in the Authorization header only, never in the body.
    assert KEY not in json.dumps(request.body)


async def test_no_authorization_header_without_a_key(model_server: FakeModelServer) -> None:
    client = ModelClient(ModelEndpoint(model_server.base_url, "m"), PRIVATE_OK)
    async with client:
        await collect(client)
    assert "authorization" not in model_server.chat_requests[0].headers


async def test_tool_calls_are_assembled_from_deltas(model_server: FakeModelServer) -> None:
    model_server.tool_calls(
        [("search", {"query": "cats and dogs", "limit": 3}, "call_1"), ("clock", {}, "call_2")],
        text="Let me look.",
    )
    async with client_for(model_server) as client:
        completion = await client.complete([{"role": "user", "content": "find"}])
    assert completion.text == "Let me look."
    assert completion.finish_reason == "tool_calls"
    assert completion.tool_calls == (
        ToolCall("call_1", "search", json.dumps({"query": "cats and dogs", "limit": 3})),
        ToolCall("call_2", "clock", "{}"),
    )


async def test_tool_call_event_comes_before_usage_and_finish(model_server: FakeModelServer) -> None:
    model_server.tool_call("search", {"q": "x"}, id="c1")
    async with client_for(model_server) as client:
        events = await collect(client)
    kinds = [type(e) for e in events]
    assert kinds[-3:] == [ToolCallEvent, Usage, Finish]


@pytest.mark.parametrize("status", [429, 500, 502, 503])
async def test_retries_with_backoff_before_the_first_token(
    model_server: FakeModelServer, status: int
) -> None:
    model_server.error(status)
    model_server.error(status)
    model_server.reply("finally")
    sleeps = Sleeps()
    async with client_for(model_server, sleep=sleeps) as client:
        completion = await client.complete([{"role": "user", "content": "hi"}])
    assert completion.text == "finally"
    assert len(model_server.chat_requests) == 3
    assert len(sleeps.calls) == 2 and all(s > 0 for s in sleeps.calls)


async def test_retry_after_header_is_honoured(model_server: FakeModelServer) -> None:
    model_server.error(429, headers={"Retry-After": "2"})
    sleeps = Sleeps()
    async with client_for(model_server, sleep=sleeps) as client:
        await client.complete([{"role": "user", "content": "hi"}])
    assert sleeps.calls == [2.0]


async def test_retries_are_bounded_then_the_error_is_mapped(model_server: FakeModelServer) -> None:
    for _ in range(3):
        model_server.error(429, {"error": {"message": "slow down", "type": "rate_limit"}})
    async with client_for(model_server, retry=RetryPolicy(attempts=3)) as client:
        with pytest.raises(ProviderRateLimited, match="slow down"):
            await collect(client)
    assert len(model_server.chat_requests) == 3
    assert model_server.pending == 0


async def test_an_account_out_of_quota_is_not_retried_as_a_rate_limit(
    model_server: FakeModelServer,
) -> None:
    """OpenAI answers 429 ``insufficient_quota`` when the account's credit is gone: waiting
    and retrying cannot help, and "rate limiting" would send the user the wrong way."""
    quota = "You exceeded your current quota, please check your plan and billing details."
    body = {"error": {"message": quota, "type": "insufficient_quota", "code": "insufficient_quota"}}
    model_server.error(429, body)
    sleeps = Sleeps()
    async with client_for(model_server, sleep=sleeps) as client:
        with pytest.raises(ProviderError) as failed:
            await collect(client)
    assert not isinstance(failed.value, ProviderRateLimited)
    assert "no quota left" in failed.value.message and quota in failed.value.message
    assert (len(model_server.chat_requests), sleeps.calls) == (1, [])


async def test_no_retry_once_text_has_arrived(model_server: FakeModelServer) -> None:
    model_server.reply("one two three four", break_after=2)
    received: list[str] = []
    async with client_for(model_server) as client:
        with pytest.raises(ProviderError, match=r"broke off|ended before"):
            async for event in client.stream([{"role": "user", "content": "hi"}]):
                if isinstance(event, TextDelta):
                    received.append(event.text)
    assert received == ["one", " two"]
    assert len(model_server.chat_requests) == 1


@pytest.mark.parametrize(
    ("status", "body", "error"),
    [
        (400, None, ProviderContextLength),  # OpenAI's context_length_exceeded (set below)
        (
            400,
            {"error": {"message": "This model's maximum context length is 4096 tokens"}},
            ProviderContextLength,
        ),
        (
            413,
            {"error": "prompt is too long: 200000 tokens > 100000 maximum"},
            ProviderContextLength,
        ),
        (
            401,
            {"error": {"message": "Incorrect API key provided", "code": "invalid_api_key"}},
            ProviderAuthError,
        ),
        (403, {"error": {"message": "forbidden"}}, ProviderAuthError),
        (400, {"error": {"message": "unknown parameter foo"}}, ProviderError),
        (404, "model not found", ProviderError),
    ],
)
async def test_provider_errors_are_mapped(
    model_server: FakeModelServer, status: int, body: object, error: type[Exception]
) -> None:
    if body is None:
        model_server.context_length_error()
    else:
        model_server.error(status, body)  # type: ignore[arg-type]
    async with client_for(model_server) as client:
        with pytest.raises(error) as info:
            await collect(client)
    assert type(info.value) is error
    assert len(model_server.chat_requests) == 1  # client errors are not retried


async def test_provider_message_echoing_the_key_is_scrubbed(model_server: FakeModelServer) -> None:
    model_server.error(401, {"error": {"message": f"Incorrect API key provided: {KEY}"}})
    async with client_for(model_server) as client:
        with pytest.raises(ProviderAuthError) as info:
            await collect(client)
    assert KEY not in str(info.value) and "***" in str(info.value)


async def test_unreachable_endpoint_is_retried_then_mapped() -> None:
    with FakeModelServer() as server:
        url = server.base_url
    sleeps = Sleeps()
    client = ModelClient(ModelEndpoint(url, "m"), PRIVATE_OK, sleep=sleeps)
    async with client:
        with pytest.raises(ProviderUnreachable):
            await collect(client)
    assert len(sleeps.calls) == 2


async def test_a_hanging_model_times_out(model_server: FakeModelServer) -> None:
    model_server.hang()
    async with client_for(model_server, timeout=0.3) as client:
        with pytest.raises(ProviderUnreachable, match="did not answer"):
            await collect(client)


async def test_slow_stream_arrives_in_order(model_server: FakeModelServer) -> None:
    model_server.reply("a b c", delay=0.05)
    async with client_for(model_server) as client:
        completion = await client.complete([{"role": "user", "content": "hi"}])
    assert completion.text == "a b c"


async def test_redirects_are_never_followed(model_server: FakeModelServer) -> None:
    """PROF-4: a 302 (here to cloud metadata) is refused, not followed."""
    model_server.redirect("http://169.254.169.254/latest/meta-data/")
    async with client_for(model_server) as client:
        with pytest.raises(EndpointNotAllowed) as info:
            await collect(client)
    assert info.value.code == "endpoint_not_allowed"
    assert len(model_server.requests) == 1


async def test_list_models(model_server: FakeModelServer) -> None:
    async with client_for(model_server) as client:
        assert await client.list_models() == ["fake-model", "fake-model-mini"]
    assert model_server.requests[-1].headers["authorization"] == f"Bearer {KEY}"


async def test_client_connects_to_the_address_the_policy_checked(
    model_server: FakeModelServer,
) -> None:
    """PROF-4: the name is resolved by the policy's resolver and that address is dialled."""
    resolver = StaticResolver({"models.corp.test": ["127.0.0.1"]})
    policy = EndpointPolicy(allow_private=True, resolver=resolver)
    url = f"http://models.corp.test:{model_server.port}/v1"
    async with ModelClient(ModelEndpoint(url, "m"), policy) as client:
        completion = await client.complete([{"role": "user", "content": "hi"}])
    assert completion.text
    assert resolver.calls == ["models.corp.test"]
    assert model_server.requests[0].headers["host"] == f"models.corp.test:{model_server.port}"


async def test_dns_rebinding_to_a_private_address_is_refused_at_connect_time(
    model_server: FakeModelServer,
) -> None:
    """PROF-4: checked on save as public; at connect time the name points inside → refused."""
    resolver = StaticResolver({"api.rebind.test": ["93.184.216.34"]})
    policy = EndpointPolicy(resolver=resolver)
    url = "https://api.rebind.test/v1"
    policy.check_url(url)  # the save-time check passes
    resolver.answers["api.rebind.test"] = ["127.0.0.1"]
    async with ModelClient(ModelEndpoint(url, "m"), policy) as client:
        with pytest.raises(EndpointNotAllowed, match="loopback"):
            await collect(client)
    assert model_server.requests == []


async def test_the_api_key_never_reaches_the_logs(
    model_server: FakeModelServer, caplog: pytest.LogCaptureFixture
) -> None:
    """PROF-2: DEBUG logging of httpx/httpcore/chatmem through retries and a stream."""
    caplog.set_level(logging.DEBUG)
    model_server.error(500)
    model_server.reply("hello")
    async with client_for(model_server) as client:
        await client.complete([{"role": "user", "content": "hi"}])
    assert caplog.records, "expected some debug logging to inspect"
    assert all(KEY not in record.getMessage() for record in caplog.records)
    assert KEY not in caplog.text


def test_endpoint_repr_hides_the_key() -> None:
    assert KEY not in repr(ModelEndpoint("https://x.test/v1", "m", KEY))
