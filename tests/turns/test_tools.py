"""MCP tools in turns (TURN-4, CTX-13, CTX-20) with a real MCP server on loopback."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient
from tests.support.mcp_server import McpServerProcess, running_mcp_server, wait_until_ready
from tests.support.model_server import FakeModelServer
from tests.turns.conftest import Chat, make_chat


@pytest.fixture(scope="module")
def mcp() -> Iterator[McpServerProcess]:
    with running_mcp_server(token="mcp-secret") as server:
        yield server


@pytest.fixture
def tool_chat(
    turn_client: TestClient, model_server: FakeModelServer, mcp: McpServerProcess
) -> Chat:
    chat = make_chat(turn_client, model_server, admin=True)
    response = turn_client.post(
        "/api/v1/mcp-servers",
        json={"name": "tools", "url": mcp.url, "bearer_token": "mcp-secret"},
        headers=chat.headers,
    )
    assert response.status_code == 201, response.text
    wait_until_ready(
        lambda path: turn_client.get(path, headers=chat.headers), response.json()["id"]
    )
    return chat


def test_tool_call_goes_through_mcp_and_its_result_is_stored_TURN_4(
    tool_chat: Chat, mcp: McpServerProcess
) -> None:
    before = mcp.stats()["calls"].get("add", 0)
    tool_chat.model.tool_call("add", {"a": 2, "b": 3}, id="call_add")
    tool_chat.model.reply("2 + 3 = 5.")
    run_id = tool_chat.start("What is 2 + 3?")
    events = tool_chat.events(run_id)
    kinds = [e["event"] for e in events]
    assert kinds.index("tool_call") < kinds.index("tool_result") < kinds.index("done")
    result = next(e for e in events if e["event"] == "tool_result")["data"]
    assert (
        result["id"] == "call_add" and result["content"] == "5" and result["status"] == "completed"
    )
    assert mcp.stats()["calls"]["add"] == before + 1
    # The tools were offered, and the second request carried the call and its result.
    first, second = tool_chat.model.chat_requests[-2:]
    offered = {t["function"]["name"] for t in first.body["tools"]}
    assert {"echo", "add", "slow"} <= offered
    assert any(
        m["role"] == "tool" and m["tool_call_id"] == "call_add" and m["content"] == "5"
        for m in second.messages
    )
    history = tool_chat.messages()
    assert [m["role"] for m in history] == ["user", "assistant", "tool", "assistant"]
    assert history[-1]["content"] == "2 + 3 = 5."
    # The plan counts the tool definitions (Tools row).
    plan = tool_chat.client.get(
        f"/api/v1/conversations/{tool_chat.conversation_id}/context", headers=tool_chat.headers
    ).json()
    assert plan["tokens"]["tools"] > 0


def test_tool_call_limit_trips_the_guard_and_answers_every_call_TURN_4(
    tool_chat: Chat, mcp: McpServerProcess
) -> None:
    tool_chat.client.app.state.settings.turn_max_tool_calls = 1  # type: ignore[attr-defined]
    before = mcp.stats()["calls"].get("echo", 0)
    tool_chat.model.tool_calls([("echo", {"text": "one"}, "c1"), ("echo", {"text": "two"}, "c2")])
    run = tool_chat.turn("Echo twice")
    assert run["status"] == "completed" and "1 tool calls" in run["note"]
    assert mcp.stats()["calls"]["echo"] == before + 1
    tools = [m for m in tool_chat.messages() if m["role"] == "tool"]
    assert [(m["tool_call_id"], m["content"]) for m in tools] == [
        ("c1", "one"),
        ("c2", "Not run: the per-turn limit of 1 tool calls was reached."),
    ]


def test_stop_during_a_tool_call_records_an_unknown_result(
    tool_chat: Chat, mcp: McpServerProcess
) -> None:
    tool_chat.model.tool_call("slow", {"seconds": 1.5, "label": "stop-me"}, id="call_stop")
    run_id = tool_chat.start("Slow please")
    tool_chat.events(run_id, limit=1)
    import time

    deadline = time.monotonic() + 10
    while "stop-me" not in mcp.stats()["started"] and time.monotonic() < deadline:
        time.sleep(0.05)
    stopped = tool_chat.client.post(f"/api/v1/runs/{run_id}/stop", headers=tool_chat.headers)
    assert stopped.json()["status"] == "stopped"
    tool = tool_chat.messages()[-1]
    assert tool["role"] == "tool" and tool["tool_call_id"] == "call_stop"
    assert "unknown" in tool["content"]


def test_budget_is_recomputed_after_a_tool_call_CTX_13(
    turn_client: TestClient, model_server: FakeModelServer, mcp: McpServerProcess
) -> None:
    chat = make_chat(
        turn_client,
        model_server,
        admin=True,
        profile={"context_window": 8192, "answer_reserve": 1024},
    )
    response = turn_client.post(
        "/api/v1/mcp-servers",
        json={"name": "tools", "url": mcp.url, "bearer_token": "mcp-secret"},
        headers=chat.headers,
    )
    assert response.status_code == 201, response.text
    wait_until_ready(
        lambda path: turn_client.get(path, headers=chat.headers), response.json()["id"]
    )
    # The tool's answer alone is larger than the window: the next request cannot be sent.
    model_server.tool_call("echo", {"text": "lorem ipsum dolor " * 2500}, id="call_big")
    run = chat.turn("Echo a lot")
    assert run["status"] == "failed"
    assert run["error"]["code"] == "does_not_fit"
    assert len(model_server.chat_requests) == 1  # never sent, never truncated (CTX-19)
    roles = [m["role"] for m in chat.messages()]
    assert roles == ["user", "assistant", "tool"]  # the call and its result are both kept
