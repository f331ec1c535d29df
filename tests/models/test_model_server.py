"""The fake model server speaks the real wire protocol: the official ``openai`` SDK reads it.

Also checks the subprocess mode used by tests that run a real ``chatmem serve``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator

import httpx
import openai
import pytest
from tests.support.model_server import FakeModelServer, RemoteModelServer


def sdk(server: FakeModelServer | RemoteModelServer, key: str = "sk-x") -> openai.OpenAI:
    return openai.OpenAI(
        base_url=server.base_url,
        api_key=key,
        max_retries=0,
        http_client=httpx.Client(trust_env=False),
    )


def test_streamed_text_with_usage_parses_with_the_openai_sdk(model_server: FakeModelServer) -> None:
    model_server.reply("Hello from the fake", usage=(7, 4))
    with sdk(model_server) as client:
        stream = client.chat.completions.create(
            model="fake-model",
            messages=[{"role": "user", "content": "hi"}],
            stream=True,
            stream_options={"include_usage": True},
        )
        chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "Hello from the fake"
    assert chunks[-1].usage is not None and chunks[-1].usage.prompt_tokens == 7


@pytest.mark.parametrize("remote", [False, True], ids=["in-process", "over-http"])
def test_a_held_stream_sends_its_first_words_and_the_rest_after_release(
    model_server: FakeModelServer, remote: bool
) -> None:
    control = RemoteModelServer(model_server.base_url) if remote else model_server
    control.reply("one two three four", hold_after=2)
    with sdk(model_server) as client:
        stream = client.chat.completions.create(
            model="fake-model", messages=[{"role": "user", "content": "hi"}], stream=True
        )
        words = (c.choices[0].delta.content for c in stream if c.choices)
        shown = [next(w for w in words if w) for _ in range(2)]  # while the rest is held
        control.release()
        rest = "".join(w or "" for w in words)
    assert "".join(shown) + rest == "one two three four"
    assert [w.strip() for w in shown] == ["one", "two"]


def test_non_streamed_tool_call_parses_with_the_openai_sdk(model_server: FakeModelServer) -> None:
    model_server.tool_call("lookup", {"id": 3}, id="call_9")
    with sdk(model_server) as client:
        result = client.chat.completions.create(
            model="fake-model", messages=[{"role": "user", "content": "hi"}]
        )
    calls = result.choices[0].message.tool_calls or []
    fn = calls[0].function  # type: ignore[union-attr]
    assert (calls[0].id, fn.name, json.loads(fn.arguments)) == ("call_9", "lookup", {"id": 3})
    assert result.choices[0].finish_reason == "tool_calls"


def test_context_length_error_is_what_the_sdk_expects(model_server: FakeModelServer) -> None:
    model_server.context_length_error()
    with sdk(model_server) as client, pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
    assert info.value.code == "context_length_exceeded"


def test_expected_key_and_models_list(model_server: FakeModelServer) -> None:
    model_server.expected_api_key = "sk-right"
    with sdk(model_server, "sk-wrong") as client, pytest.raises(openai.AuthenticationError):
        client.models.list()
    with sdk(model_server, "sk-right") as client:
        assert [m.id for m in client.models.list()] == ["fake-model", "fake-model-mini"]


def test_default_reply_when_nothing_is_scripted(model_server: FakeModelServer) -> None:
    with sdk(model_server) as client:
        result = client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "x"}]
        )
    assert result.choices[0].message.content == model_server.default_reply


@pytest.fixture
def subprocess_server() -> Iterator[RemoteModelServer]:
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.support.model_server", "--port", "0"],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("READY "), line
        yield RemoteModelServer(line.split()[1])
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_subprocess_mode_is_scriptable_over_http(subprocess_server: RemoteModelServer) -> None:
    subprocess_server.reply("remote answer")
    subprocess_server.tool_call("t", {"a": 1})
    with sdk(subprocess_server) as client:
        first = client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "1"}]
        )
        second = client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "2"}]
        )
    assert first.choices[0].message.content == "remote answer"
    assert second.choices[0].message.tool_calls[0].function.name == "t"  # type: ignore[index,union-attr]
    recorded = subprocess_server.requests
    assert [r.messages[0]["content"] for r in recorded] == ["1", "2"]
    subprocess_server.reset()
    assert subprocess_server.requests == []
