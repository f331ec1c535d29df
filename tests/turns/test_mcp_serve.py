"""Issue 11, PROV-3 through a real ``chatmem serve``: a hung MCP server next to a working one.

chatmem, the fake model server, the MCP SDK's server (streamable HTTP) and a TCP server that
accepts and never answers each run in their own process or thread, as deployed.  What the
user sees over the API: turns that use the working server's tools complete while the hung
one is registered, the next turn too, and Stop ends a turn whose tool call hangs within 2 s.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from tests.support.hung_server import hung_server
from tests.support.mcp_server import running_mcp_server, wait_until_ready
from tests.support.serve import ServeProcess, fake_profile, model_server_process

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    state: Path = tmp_path_factory.mktemp("serve-mcp")
    with (
        model_server_process() as model,
        running_mcp_server(token="serve-test") as mcp,
        hung_server() as hung,
    ):
        server = ServeProcess(state)
        server.start()
        try:
            with server.signed_in("root", admin=True) as client:
                profile_id = fake_profile(client, model.base_url)
                working = client.post(
                    "/api/v1/mcp-servers",
                    json={"name": "tools", "url": mcp.url, "bearer_token": "serve-test"},
                )
                assert working.status_code in (200, 201), working.text
                wait_until_ready(client.get, working.json()["id"])
                stuck = client.post(
                    "/api/v1/mcp-servers",
                    json={"name": "hung", "url": hung.url, "connect_timeout": 10},
                )
                assert stuck.status_code in (200, 201), stuck.text
                yield {"client": client, "model": model, "profile_id": profile_id}
        finally:
            server.stop()


def _turn(world: dict[str, Any], content: str) -> str:
    client: httpx.Client = world["client"]
    cid = client.post(
        "/api/v1/conversations", json={"title": content, "profile_id": world["profile_id"]}
    ).json()["id"]
    submitted = client.post(f"/api/v1/conversations/{cid}/turns", json={"content": content})
    assert submitted.status_code == 202, submitted.text
    return str(submitted.json()["run_id"])


def _events_until(client: httpx.Client, run_id: str, kinds: set[str]) -> list[str]:
    seen: list[str] = []
    with client.stream("GET", f"/api/v1/runs/{run_id}/events", timeout=60) as response:
        for line in response.iter_lines():
            if line.startswith("event: "):
                seen.append(line.removeprefix("event: "))
                if seen[-1] in kinds:
                    break
    return seen


def test_turns_use_the_working_server_while_a_hung_one_is_registered(
    world: dict[str, Any],
) -> None:
    client, model = world["client"], world["model"]
    for attempt in range(2):  # this turn, and the next one
        model.tool_call("add", {"a": 2, "b": 3}, id=f"call_add_{attempt}")
        model.reply("2 + 3 = 5")
        run_id = _turn(world, f"add, turn {attempt}")
        seen = _events_until(client, run_id, {"done", "error"})
        assert seen[-1] == "done", seen
        assert "tool_result" in seen
        run = client.get(f"/api/v1/runs/{run_id}").json()
        assert run["status"] == "completed", run


def test_stop_ends_a_turn_within_two_seconds_while_a_tool_call_hangs(
    world: dict[str, Any],
) -> None:
    client, model = world["client"], world["model"]
    model.tool_call("slow", {"seconds": 60, "label": "serve-stop"}, id="call_slow_serve")
    run_id = _turn(world, "slow")
    assert _events_until(client, run_id, {"tool_call"})[-1] == "tool_call"
    started = time.monotonic()
    stopped = client.post(f"/api/v1/runs/{run_id}/stop")
    assert stopped.status_code == 200, stopped.text
    seen = _events_until(client, run_id, {"done", "error"})
    took = time.monotonic() - started
    assert seen[-1] == "done" and took < 2.0, (seen, took)
    assert client.get(f"/api/v1/runs/{run_id}").json()["status"] == "stopped"
