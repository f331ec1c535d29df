"""PROV-3: a hung or dead MCP server costs a turn nothing, Stop always works, health is shown.

Issue 11's evidence replayed: a server that accepts TCP and never answers, registered next to
a working one (the real MCP SDK's server over streamable HTTP).  The turn uses the working
server's tools without waiting for the hung one, Stop ends a turn within 2 s whatever a tool
does, the next turn is not affected, the log names only the failing server, and the
administrators see each server's health in the API.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from tests.support.hung_server import HungServer, hung_server
from tests.support.mcp_server import McpServerProcess, running_mcp_server, wait_until_ready
from tests.support.model_server import FakeModelServer
from tests.turns.conftest import Chat, make_chat, parse_sse


@pytest.fixture(scope="module")
def mcp() -> Iterator[McpServerProcess]:
    with running_mcp_server(token="mcp-secret") as server:
        yield server


@pytest.fixture
def hung() -> Iterator[HungServer]:
    with hung_server() as server:
        yield server


def register(chat: Chat, name: str, url: str, **fields: Any) -> str:
    response = chat.client.post(
        "/api/v1/mcp-servers",
        json={"name": name, "url": url, "bearer_token": "mcp-secret", **fields},
        headers=chat.headers,
    )
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


def server_view(chat: Chat, server_id: str) -> dict[str, Any]:
    response = chat.client.get(f"/api/v1/mcp-servers/{server_id}", headers=chat.headers)
    assert response.status_code == 200, response.text
    return dict(response.json())


def wait_health(chat: Chat, server_id: str, state: str, timeout: float = 15.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        health = server_view(chat, server_id)["health"]
        if health["state"] == state:
            return dict(health)
        assert time.monotonic() < deadline, health
        time.sleep(0.02)


def timed_events(chat: Chat, run_id: str, until: str | None = None) -> list[tuple[float, dict]]:
    """The run's events with the time each arrived; stops after ``until`` when given."""
    out: list[tuple[float, dict[str, Any]]] = []
    with chat.client.stream(
        "GET", f"/api/v1/runs/{run_id}/events", headers=chat.headers
    ) as response:
        assert response.status_code == 200
        for event in parse_sse(response.iter_lines()):
            out.append((time.monotonic(), event))
            if event["event"] == until:
                break
    return out


@pytest.fixture
def chat(turn_client: TestClient, model_server: FakeModelServer) -> Chat:
    return make_chat(turn_client, model_server, admin=True)


def first_token_delay(chat: Chat, text: str) -> float:
    chat.model.reply(text)
    began = time.monotonic()
    run_id = chat.start("Say something")
    events = timed_events(chat, run_id)
    first = next(at for at, event in events if event["event"] == "delta")
    assert events[-1][1]["event"] == "done"
    return first - began


def test_a_hung_server_next_to_a_working_one_takes_nothing_from_the_turn_PROV_3(
    chat: Chat, mcp: McpServerProcess, hung: HungServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="chatmem")
    # The hung server's connect timeout is far longer than the test: it stays "connecting".
    hung_id = register(chat, "hung", hung.url, connect_timeout=120)
    tools_id = register(chat, "tools", mcp.url)
    wait_until_ready(lambda path: chat.client.get(path, headers=chat.headers), tools_id)
    assert hung.wait_accepted()
    baseline = first_token_delay(chat, "Hello.")

    chat.model.tool_call("add", {"a": 2, "b": 3}, id="call_add")
    chat.model.reply("2 + 3 = 5.")
    began = time.monotonic()
    run_id = chat.start("What is 2 + 3?")
    events = timed_events(chat, run_id)
    first_tool_call = next(at for at, e in events if e["event"] == "tool_call") - began
    kinds = [e["event"] for _, e in events]
    assert kinds[-1] == "done", events
    result = next(e for _, e in events if e["event"] == "tool_result")["data"]
    assert (result["content"], result["status"]) == ("5", "completed")
    offered = {t["function"]["name"] for t in chat.model.chat_requests[-2].body["tools"]}
    assert {"echo", "add", "slow"} <= offered  # the working server's tools
    # Not the hung server's 120 s, nor even the quarter second a new server is waited for.
    assert first_tool_call < 2.0
    # The next turn is not affected either.
    assert first_token_delay(chat, "Still here.") < baseline + 1.0
    assert server_view(chat, hung_id)["health"]["state"] == "connecting"
    # Nothing logged about either server so far: the hung one has not failed yet.
    assert not [r for r in caplog.records if "MCP server" in r.getMessage()]


def test_health_and_logs_name_only_the_failing_server_PROV_3(
    chat: Chat, mcp: McpServerProcess, hung: HungServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="chatmem")
    hung_id = register(chat, "hung", hung.url, connect_timeout=0.5)
    tools_id = register(chat, "tools", mcp.url)
    failed = wait_health(chat, hung_id, "failed")
    assert failed["last_error"] == "no answer within 0.5 s (connect timeout)"
    assert failed["last_error_at"] and failed["last_success_at"] is None
    assert failed["tool_count"] is None and failed["tools"] == []
    ready = wait_health(chat, tools_id, "ready")
    assert {"add", "echo", "slow"} <= set(ready["tools"])
    assert ready["tool_count"] == len(ready["tools"])
    assert ready["last_success_at"] and ready["last_error"] is None
    # A turn meanwhile: the working server's tools, at once.
    chat.model.tool_call("echo", {"text": "hi"}, id="call_echo")
    chat.model.reply("It said hi.")
    run = chat.turn("Echo hi")
    assert run["status"] == "completed"
    assert chat.messages()[2]["content"] == "hi"
    listed = chat.client.get("/api/v1/mcp-servers", headers=chat.headers).json()["items"]
    assert {s["name"]: s["health"]["state"] for s in listed} == {"hung": "failed", "tools": "ready"}
    # The log names the failing server and why, once, and never the healthy one.
    messages = [r.getMessage() for r in caplog.records if "MCP server" in r.getMessage()]
    assert messages == ["MCP server hung unavailable: no answer within 0.5 s (connect timeout)"]
    assert all(r.levelno == logging.WARNING for r in caplog.records if "MCP" in r.getMessage())


def test_a_server_that_is_down_is_failed_with_its_reason_PROV_3(chat: Chat) -> None:
    import socket

    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    down_id = register(chat, "down", f"http://127.0.0.1:{port}/mcp")
    health = wait_health(chat, down_id, "failed")
    assert "ConnectError" in health["last_error"]
    chat.model.reply("No tools today.")
    assert chat.turn("Hello")["status"] == "completed"
    offered = chat.model.chat_requests[-1].body.get("tools") or []
    assert [t["function"]["name"] for t in offered] == ["recall"]  # built in (issue 17)


def test_a_server_refusing_our_token_says_so_PROV_3(chat: Chat, mcp: McpServerProcess) -> None:
    server_id = register(chat, "tools", mcp.url, bearer_token="wrong")
    health = wait_health(chat, server_id, "failed")
    assert health["last_error"].endswith("(HTTP 401)")
    assert "wrong" not in health["last_error"]  # never a header


def test_stop_ends_a_turn_within_2_s_while_a_tool_call_hangs_PROV_3(
    chat: Chat, mcp: McpServerProcess, hung: HungServer
) -> None:
    register(chat, "hung", hung.url, connect_timeout=120)
    tools_id = register(chat, "tools", mcp.url)
    wait_until_ready(lambda path: chat.client.get(path, headers=chat.headers), tools_id)
    label = f"hangs-{uuid.uuid4().hex}"  # the MCP server lives for the module
    chat.model.tool_call("slow", {"seconds": 60, "label": label}, id="call_hang")
    run_id = chat.start("Take your time")
    timed_events(chat, run_id, until="tool_call")
    deadline = time.monotonic() + 10
    while label not in mcp.stats()["started"]:  # the call reached the tool server
        assert time.monotonic() < deadline
        time.sleep(0.02)
    began = time.monotonic()
    stopped = chat.client.post(f"/api/v1/runs/{run_id}/stop", headers=chat.headers)
    took = time.monotonic() - began
    assert stopped.json()["status"] == "stopped"
    assert took < 2.0, took
    tool = chat.messages()[-1]
    assert (tool["role"], tool["tool_call_id"]) == ("tool", "call_hang")
    assert "unknown" in tool["content"] and tool["meta"]["status"] == "unknown"
    # The next turn is not affected: the same server answers the next call at once.
    chat.model.tool_call("add", {"a": 1, "b": 1}, id="call_next")
    chat.model.reply("Two.")
    began = time.monotonic()
    run = chat.turn("1 + 1?")
    assert run["status"] == "completed" and time.monotonic() - began < 5
    assert chat.messages()[-2]["content"] == "2"


def test_a_call_past_its_timeout_has_an_unknown_result_and_the_turn_goes_on_PROV_3(
    chat: Chat, mcp: McpServerProcess, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="chatmem")
    tools_id = register(chat, "tools", mcp.url, call_timeout=0.3)
    wait_until_ready(lambda path: chat.client.get(path, headers=chat.headers), tools_id)
    chat.model.tool_call("slow", {"seconds": 30, "label": "too-slow"}, id="call_slow")
    chat.model.reply("The tool took too long.")
    run = chat.turn("Slow, please")
    assert run["status"] == "completed"
    tool = [m for m in chat.messages() if m["role"] == "tool"][-1]
    assert tool["content"].startswith("The tool did not answer within 0.3 s")
    assert tool["meta"]["status"] == "unknown"
    health = server_view(chat, tools_id)["health"]
    assert health["state"] == "ready"
    assert health["last_error"] == "tool slow had no answer within 0.3 s (call timeout)"
    assert [r.getMessage() for r in caplog.records if "MCP server" in r.getMessage()] == [
        "MCP server tools: tool slow had no answer within 0.3 s (call timeout)"
    ]


def test_a_server_removed_during_a_call_leaves_an_unknown_result_PROV_3(
    chat: Chat, mcp: McpServerProcess
) -> None:
    tools_id = register(chat, "tools", mcp.url)
    wait_until_ready(lambda path: chat.client.get(path, headers=chat.headers), tools_id)
    label = f"removed-{uuid.uuid4().hex}"
    chat.model.tool_call("slow", {"seconds": 30, "label": label}, id="call_removed")
    chat.model.reply("The server went away.")
    run_id = chat.start("Slow, please")
    deadline = time.monotonic() + 10
    while label not in mcp.stats()["started"]:
        assert time.monotonic() < deadline
        time.sleep(0.02)
    deleted = chat.client.delete(f"/api/v1/mcp-servers/{tools_id}", headers=chat.headers)
    assert deleted.status_code == 204
    run = chat.wait(run_id, timeout=5)
    assert run["status"] == "completed"
    tool = [m for m in chat.messages() if m["role"] == "tool"][-1]
    assert tool["meta"]["status"] == "unknown"
    assert "connection to the MCP server 'tools' ended during the call" in tool["content"]
