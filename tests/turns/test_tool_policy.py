"""PROV-6: allow-lists, "ask first" tools and the record of every tool call, over HTTP.

An administrator limits which tools of a server are offered and marks some "ask first"; such a
call pauses the turn (still ``running``, its JSON says what it waits on, an ``approval``
event shows the call) until the user approves or refuses it through the API.  Every call is
recorded and listed for administrators only.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from tests.support.app import make_user
from tests.support.mcp_server import McpServerProcess, running_mcp_server, wait_until_ready
from tests.support.model_server import FakeModelServer
from tests.turns.conftest import Chat, make_chat, parse_sse


@pytest.fixture(scope="module")
def mcp() -> Iterator[McpServerProcess]:
    with running_mcp_server(token="mcp-secret") as server:
        yield server


@pytest.fixture
def chat(turn_client: TestClient, model_server: FakeModelServer, mcp: McpServerProcess) -> Chat:
    chat = make_chat(turn_client, model_server, admin=True)
    response = turn_client.post(
        "/api/v1/mcp-servers",
        json={"name": "tools", "url": mcp.url, "bearer_token": "mcp-secret"},
        headers=chat.headers,
    )
    assert response.status_code == 201, response.text
    chat.server_id = response.json()["id"]  # type: ignore[attr-defined]
    wait_until_ready(lambda path: turn_client.get(path, headers=chat.headers), chat.server_id)  # type: ignore[attr-defined]
    return chat


def policy(chat: Chat, **fields: Any) -> dict[str, Any]:
    response = chat.client.patch(
        f"/api/v1/mcp-servers/{chat.server_id}",  # type: ignore[attr-defined]
        json=fields,
        headers=chat.headers,
    )
    assert response.status_code == 200, response.text
    return dict(response.json())


def events_until(chat: Chat, run_id: str, kind: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    with chat.client.stream(
        "GET", f"/api/v1/runs/{run_id}/events", headers=chat.headers
    ) as response:
        for event in parse_sse(response.iter_lines()):
            out.append(event)
            if event["event"] == kind:
                return out
    raise AssertionError(f"no {kind} event in {out}")


def answer(chat: Chat, run_id: str, call_id: str, verb: str, headers: Any = None) -> Any:
    return chat.client.post(
        f"/api/v1/runs/{run_id}/tool-calls/{call_id}/{verb}", headers=headers or chat.headers
    )


def admin_list(chat: Chat, **params: Any) -> list[dict[str, Any]]:
    response = chat.client.get("/api/v1/admin/tool-calls", params=params, headers=chat.headers)
    assert response.status_code == 200, response.text
    return list(response.json()["items"])


def test_only_the_allowed_tools_are_offered_PROV_6(chat: Chat, mcp: McpServerProcess) -> None:
    view = policy(chat, allowed_tools=["add"])
    assert view["allowed_tools"] == ["add"] and view["ask_first_tools"] == []
    chat.model.reply("Only add.")
    chat.turn("Which tools?")
    offered = [t["function"]["name"] for t in chat.model.chat_requests[-1].body["tools"]]
    assert offered == ["add", "recall"]  # and the built-in recall (issue 17)
    # A call of a tool that is not offered never reaches the server.
    before = mcp.stats()["calls"].get("echo", 0)
    chat.model.tool_call("echo", {"text": "sneaky"}, id="call_echo")
    chat.model.reply("Could not.")
    chat.turn("Echo anyway")
    assert mcp.stats()["calls"].get("echo", 0) == before
    assert chat.messages()[-2]["content"] == "Unknown tool 'echo'."
    # null offers every tool again; the context plan counts what a turn offers.
    assert policy(chat, allowed_tools=None)["allowed_tools"] is None
    chat.model.reply("All of them.")
    chat.turn("And now?")
    offered = {t["function"]["name"] for t in chat.model.chat_requests[-1].body["tools"]}
    assert {"add", "echo", "slow"} <= offered


@pytest.mark.parametrize(
    "fields",
    [
        {"allowed_tools": "add"},
        {"ask_first_tools": [1]},
        {"call_timeout": 0},
        {"connect_timeout": -1},
    ],
)
def test_a_malformed_policy_is_refused_PROV_6(chat: Chat, fields: dict[str, Any]) -> None:
    response = chat.client.patch(
        f"/api/v1/mcp-servers/{chat.server_id}",  # type: ignore[attr-defined]
        json=fields,
        headers=chat.headers,
    )
    assert response.status_code in (400, 422)
    assert response.json()["error"]["code"] == "invalid_input"


def test_an_ask_first_call_waits_and_runs_once_approved_PROV_6(
    chat: Chat, mcp: McpServerProcess
) -> None:
    policy(chat, ask_first_tools=["add"])
    before = mcp.stats()["calls"].get("add", 0)
    chat.model.tool_call("add", {"a": 2, "b": 3}, id="call_add")
    chat.model.reply("2 + 3 = 5.")
    run_id = chat.start("What is 2 + 3?")
    events = events_until(chat, run_id, "approval")
    shown = events[-1]["data"]
    assert shown == {
        "tool_call_id": "call_add",
        "name": "add",
        "arguments": json.dumps({"a": 2, "b": 3}),
        "server": "tools",
        "tool": "add",
        "status": "waiting",
    }
    run = chat.run(run_id)
    assert run["status"] == "running"
    assert run["waiting"] == {k: v for k, v in shown.items() if k != "status"}
    assert mcp.stats()["calls"].get("add", 0) == before  # nothing was called yet
    approved = answer(chat, run_id, "call_add", "approve")
    assert approved.status_code == 200, approved.text
    assert answer(chat, run_id, "call_add", "approve").status_code == 200  # a second click
    run = chat.wait(run_id)
    assert run["status"] == "completed" and run["waiting"] is None
    assert mcp.stats()["calls"]["add"] == before + 1
    kinds = [e["event"] for e in chat.events(run_id)]
    assert kinds.count("approval") == 2
    assert kinds.index("approval") < kinds.index("tool_result")
    decided = [e["data"] for e in chat.events(run_id) if e["event"] == "approval"][-1]
    assert decided["status"] == "approved"
    assert [(m["role"], m["content"]) for m in chat.messages()][-2:] == [
        ("tool", "5"),
        ("assistant", "2 + 3 = 5."),
    ]
    # Too late to change one's mind.
    late = answer(chat, run_id, "call_add", "refuse")
    assert late.status_code == 409 and late.json()["error"]["code"] == "conflict"
    (record,) = admin_list(chat)
    assert record["status"] == "completed" and record["tool"] == "add"
    assert record["decision"]["decision"] == "approved"
    assert record["decision"]["by"] == chat.user.id and record["decision"]["at"]


def test_a_refused_call_is_not_made_and_the_model_is_told_PROV_6(
    chat: Chat, mcp: McpServerProcess
) -> None:
    policy(chat, ask_first_tools=["echo"])
    before = mcp.stats()["calls"].get("echo", 0)
    chat.model.tool_call("echo", {"text": "secret"}, id="call_echo")
    chat.model.reply("Understood, I will not.")
    run_id = chat.start("Echo secret")
    events_until(chat, run_id, "approval")
    refused = answer(chat, run_id, "call_echo", "refuse")
    assert refused.status_code == 200, refused.text
    assert chat.wait(run_id)["status"] == "completed"
    assert mcp.stats()["calls"].get("echo", 0) == before
    tool = chat.messages()[-2]
    assert tool["content"] == "Not run: the user refused this tool call."
    assert tool["meta"]["status"] == "refused"
    sent = chat.model.chat_requests[-1].messages
    assert any(
        m["role"] == "tool" and m["content"] == "Not run: the user refused this tool call."
        for m in sent
    )
    (record,) = admin_list(chat)
    assert record["status"] == "refused" and record["decision"]["decision"] == "refused"
    assert record["duration_ms"] is None


def test_only_the_runs_owner_answers_and_only_a_waiting_call_PROV_6(chat: Chat) -> None:
    policy(chat, ask_first_tools=["add"])
    chat.model.tool_call("add", {"a": 1, "b": 2}, id="call_add")
    chat.model.reply("3.")
    run_id = chat.start("1 + 2?")
    events_until(chat, run_id, "approval")
    other = make_user(chat.client, "mallory")
    assert answer(chat, run_id, "call_add", "approve", other.headers).status_code == 404
    assert answer(chat, run_id, "no_such_call", "approve").status_code == 404
    assert answer(chat, run_id, "call_add", "refuse").status_code == 200
    assert answer(chat, run_id, "call_add", "approve").status_code == 409
    assert chat.wait(run_id)["status"] == "completed"


def test_stop_while_waiting_ends_the_turn_and_the_call_is_not_made_PROV_6(
    chat: Chat, mcp: McpServerProcess
) -> None:
    policy(chat, ask_first_tools=["add"])
    before = mcp.stats()["calls"].get("add", 0)
    chat.model.tool_call("add", {"a": 4, "b": 4}, id="call_add")
    run_id = chat.start("4 + 4?")
    events_until(chat, run_id, "approval")
    began = time.monotonic()
    stopped = chat.client.post(f"/api/v1/runs/{run_id}/stop", headers=chat.headers).json()
    assert stopped["status"] == "stopped" and stopped["waiting"] is None
    assert time.monotonic() - began < 2.0
    tool = chat.messages()[-1]
    assert tool["content"] == "Not run: the turn was stopped before this tool call was made."
    assert answer(chat, run_id, "call_add", "approve").status_code == 409
    assert mcp.stats()["calls"].get("add", 0) == before
    (record,) = admin_list(chat)
    assert record["status"] == "not_run"


def test_no_answer_in_time_counts_as_refused_PROV_6(chat: Chat) -> None:
    chat.client.app.state.settings.tool_approval_timeout = 0.2  # type: ignore[attr-defined]
    policy(chat, ask_first_tools=["add"])
    chat.model.tool_call("add", {"a": 1, "b": 1}, id="call_add")
    chat.model.reply("You did not answer.")
    run = chat.turn("1 + 1?")
    assert run["status"] == "completed"
    assert (
        chat.messages()[-2]["content"]
        == "Not run: the user did not approve this tool call in time."
    )
    (record,) = admin_list(chat)
    assert (record["status"], record["decision"]["decision"]) == ("refused", "expired")


def test_every_tool_call_is_listed_for_administrators_only_PROV_6(
    chat: Chat, turn_client: TestClient
) -> None:
    arguments = {"a": 20, "b": 22}
    chat.model.tool_call("add", arguments, id="call_1")
    chat.model.tool_call("echo", {"text": "x"}, id="call_2")
    chat.model.reply("Done.")
    assert chat.turn("Two calls")["status"] == "completed"
    newest, oldest = admin_list(chat)
    assert (oldest["tool"], newest["tool"]) == ("add", "echo")
    assert oldest["user"] == {"id": chat.user.id, "name": chat.user.name}
    assert oldest["server"] == {"id": chat.server_id, "name": "tools"}  # type: ignore[attr-defined]
    assert oldest["arguments_sha256"] == hashlib.sha256(json.dumps(arguments).encode()).hexdigest()
    assert "arguments" not in oldest and "result" not in oldest  # what users said stays theirs
    assert oldest["status"] == "completed" and oldest["decision"] is None
    assert oldest["duration_ms"] >= 0 and oldest["started_at"] and oldest["finished_at"]
    assert oldest["run_id"] == newest["run_id"] and oldest["call_id"] == "call_1"
    # Paged newest first, and filtered.
    page = chat.client.get("/api/v1/admin/tool-calls?limit=1", headers=chat.headers).json()
    assert [i["id"] for i in page["items"]] == [newest["id"]]
    rest = chat.client.get(
        f"/api/v1/admin/tool-calls?limit=1&before={page['next_before']}", headers=chat.headers
    ).json()
    assert [i["id"] for i in rest["items"]] == [oldest["id"]] and rest["next_before"] is None
    assert admin_list(chat, user_id="nobody") == []
    # A user who is not an administrator is refused.
    user = make_user(turn_client, "bob")
    refused = turn_client.get("/api/v1/admin/tool-calls", headers=user.headers)
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "forbidden"
