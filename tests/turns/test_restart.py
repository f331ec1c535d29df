"""TURN-3: a real ``chatmem serve`` is SIGKILLed mid-stream and mid-tool-call, then restarted.

Everything runs as separate processes talking over loopback: the fake model server (scripted
over HTTP), the MCP test server (which counts calls), and chatmem itself.  After each kill the
restarted server must show the run ``interrupted``, keep what was streamed or completed, mark
the tool call ``unknown`` without making it again, and continue the conversation in a new turn.

Nothing here waits for time to pass: a test waits on the run's own event stream, or on the fake
servers, which answer a waiting request the moment what it waits for has happened
(``tests.support.awaited_servers``).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from sqlalchemy import select
from tests.support.awaited_servers import AwaitedMcpServer, awaited_mcp_server, awaited_model_server
from tests.support.mcp_server import wait_until_ready
from tests.support.runs import finished_run
from tests.support.serve import ServeProcess, fake_profile
from tests.turns.conftest import parse_sse

from chatmem.store.db import Database
from chatmem.store.tables.conversations import Message
from chatmem.store.tables.runs import ToolCallRow

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """One set of processes for the module (starting them is most of the cost)."""
    state = tmp_path_factory.mktemp("serve-state")
    server = ServeProcess(state)
    with awaited_model_server() as model, awaited_mcp_server(token="mcp-secret") as mcp:
        server.start()
        try:
            db = Database(server.database_url)
            api = server.signed_in("root", admin=True)
            profile_id = fake_profile(api, model.base_url)
            created = api.post(
                "/api/v1/mcp-servers",
                json={
                    "name": "tools",
                    "url": mcp.url,
                    "bearer_token": "mcp-secret",
                },
            )
            assert created.status_code == 201, created.text
            wait_until_ready(api.get, created.json()["id"])
            yield {
                "server": server,
                "model": model,
                "mcp": mcp,
                "api": api,
                "db": db,
                "profile_id": profile_id,
            }
            api.close()
            db.dispose()
        finally:
            server.stop()


@pytest.fixture
def conversation(world: dict[str, Any]) -> str:
    response = world["api"].post(
        "/api/v1/conversations",
        json={
            "title": "kill",
            "profile_id": world["profile_id"],
        },
    )
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


def _events_until(api: httpx.Client, run_id: str, predicate: Any) -> list[dict[str, Any]]:
    seen: list[dict[str, Any]] = []
    with api.stream("GET", f"/api/v1/runs/{run_id}/events") as response:
        for event in parse_sse(response.iter_lines()):
            seen.append(event)
            if predicate(seen):
                break
    return seen


def _history(db: Database, conversation_id: str) -> list[Message]:
    with db.session() as session:
        return list(
            session.scalars(
                select(Message)
                .where(Message.conversation_id == conversation_id)
                .order_by(Message.seq)
            )
        )


def _start(api: httpx.Client, conversation_id: str, content: str) -> str:
    response = api.post(f"/api/v1/conversations/{conversation_id}/turns", json={"content": content})
    assert response.status_code == 202, response.text
    return str(response.json()["run_id"])


def test_kill_mid_stream_keeps_streamed_text_and_marks_interrupted_TURN_3(
    world: dict[str, Any], conversation: str
) -> None:
    server, model, api, db = (world[k] for k in ("server", "model", "api", "db"))
    cid = conversation
    full = " ".join(f"word{i}" for i in range(60))
    model.reply(full, delay=0.05)
    run_id = _start(api, cid, "Tell me a long story")

    def stored_what_was_seen(events: list[dict[str, Any]]) -> bool:
        # Five deltas seen, and, checked at each later event (the journal stores in batches
        # as events come), the run's stored events reach the fifth.
        deltas = [e for e in events if e["event"] == "delta"]
        return (
            len(deltas) >= 5
            and api.get(f"/api/v1/runs/{run_id}").json()["last_event_id"] >= deltas[4]["id"]
        )

    events = _events_until(api, run_id, stored_what_was_seen)
    assert events[-1]["event"] == "delta"  # mid-stream still
    seen = [e for e in events if e["event"] == "delta"][:5]
    server.kill()
    server.start()

    run = api.get(f"/api/v1/runs/{run_id}").json()
    assert run["status"] == "interrupted"
    history = _history(db, cid)
    assert [m.role for m in history] == ["user", "assistant"]
    kept = history[-1].content
    streamed = "".join(e["data"]["text"] for e in seen if e["event"] == "delta")
    assert kept.startswith(streamed) and full.startswith(kept) and kept != full
    # Replaying the run's events ends with the interruption.
    replay = _events_until(api, run_id, lambda ev: False)
    assert replay[-1]["event"] == "error" and replay[-1]["data"]["code"] == "interrupted"
    # A new turn continues the conversation on the stored history.
    model.reply("Continuing the story.")
    new_run = _start(api, cid, "Go on")
    assert finished_run(api, new_run)["status"] == "completed"
    sent = model.requests[-1].body["messages"]
    assert any(m["role"] == "assistant" and m["content"] == kept for m in sent)


def test_kill_mid_tool_call_marks_it_unknown_and_never_replays_it_TURN_3(
    world: dict[str, Any], conversation: str
) -> None:
    server, model, api, db = (world[k] for k in ("server", "model", "api", "db"))
    cid = conversation
    mcp: AwaitedMcpServer = world["mcp"]
    model.tool_call("slow", {"seconds": 2.5, "label": "once"}, id="call_slow_1")
    run_id = _start(api, cid, "Run the slow tool")
    _events_until(api, run_id, lambda ev: ev[-1]["event"] == "tool_call")
    assert mcp.wait(started="once")["calls"] == {"slow": 1}  # the call is on the MCP server
    server.kill()
    server.start()

    run = api.get(f"/api/v1/runs/{run_id}").json()
    assert run["status"] == "interrupted"
    with db.session() as session:
        calls = list(session.scalars(select(ToolCallRow).where(ToolCallRow.run_id == run_id)))
    assert [(c.name, c.status) for c in calls] == [("slow", "unknown")]
    history = _history(db, cid)
    assert [m.role for m in history] == ["user", "assistant", "tool"]
    assert history[1].tool_calls and history[1].tool_calls[0]["id"] == "call_slow_1"
    assert history[2].tool_call_id == "call_slow_1" and "unknown" in history[2].content
    # A new turn continues; the slow tool is not called again.
    model.reply("The slow tool's result is unknown; shall I run it again?")
    new_run = _start(api, cid, "What happened?")
    assert finished_run(api, new_run)["status"] == "completed"
    stats = mcp.wait(finished="once")  # past the point the interrupted call finished
    assert stats["calls"] == {"slow": 1}
    sent = model.requests[-1].body["messages"]
    assert any(m["role"] == "tool" and m.get("tool_call_id") == "call_slow_1" for m in sent)
    assert json.dumps(sent).count("call_slow_1") >= 2  # the call and its (unknown) result


def test_kill_while_a_call_waits_for_approval_marks_it_not_run_PROV_6(
    world: dict[str, Any], conversation: str
) -> None:
    server, model, api, db = (world[k] for k in ("server", "model", "api", "db"))
    servers = api.get("/api/v1/mcp-servers").json()["items"]
    server_id = servers[0]["id"]
    api.patch(f"/api/v1/mcp-servers/{server_id}", json={"ask_first_tools": ["add"]})
    try:
        model.tool_call("add", {"a": 1, "b": 2}, id="call_ask")
        run_id = _start(api, conversation, "1 + 2?")
        _events_until(api, run_id, lambda ev: ev[-1]["event"] == "approval")
        assert api.get(f"/api/v1/runs/{run_id}").json()["waiting"]["tool_call_id"] == "call_ask"
        server.kill()
        server.start()
    finally:
        api.patch(f"/api/v1/mcp-servers/{server_id}", json={"ask_first_tools": []})
    run = api.get(f"/api/v1/runs/{run_id}").json()
    assert run["status"] == "interrupted" and run["waiting"] is None
    with db.session() as session:
        calls = list(session.scalars(select(ToolCallRow).where(ToolCallRow.run_id == run_id)))
    assert [(c.name, c.status) for c in calls] == [("add", "not_run")]
    tool = _history(db, conversation)[-1]
    assert tool.tool_call_id == "call_ask"
    assert tool.content == "Not run: the server restarted before this tool call was approved."
    assert api.post(f"/api/v1/runs/{run_id}/tool-calls/call_ask/approve").status_code == 409


def test_kill_mid_compaction_leaves_summary_and_history_unchanged_CTX_12(
    world: dict[str, Any], conversation: str
) -> None:
    import threading

    from chatmem.store.messages import append_message
    from chatmem.store.tables.conversations import Conversation, Summary

    server, model, api, db = (world[k] for k in ("server", "model", "api", "db"))
    with db.session(write=True) as session:
        row = session.get(Conversation, conversation)
        assert row is not None
        for i in range(3):
            append_message(session, row, "user", f"Question {i}")
            append_message(session, row, "assistant", f"Answer {i}")
    before = [(m.id, m.content) for m in _history(db, conversation)]
    asked = len(model.requests)
    model.hang(5)

    def compact() -> None:
        with contextlib.suppress(httpx.HTTPError):  # the server is killed under it
            api.post(f"/api/v1/conversations/{conversation}/compact", json={}, timeout=10)

    caller = threading.Thread(target=compact)
    caller.start()
    model.wait_for_requests(asked + 1)
    assert len(model.requests) == asked + 1  # the summariser request is in flight
    server.kill()
    caller.join(15)
    server.start()

    with db.session() as session:
        assert (
            session.scalars(select(Summary).where(Summary.conversation_id == conversation)).all()
            == []
        )
    assert [(m.id, m.content) for m in _history(db, conversation)] == before
    model.reply("Goal: the questions so far.")
    again = api.post(f"/api/v1/conversations/{conversation}/compact", json={})
    assert again.status_code == 200, again.text
