"""Benchmark of MCP tool servers (PROV-3, issue 11).  Exit status 1 when a bar is missed.

Through ``chatmem serve`` (SQLite), the fake model server and the test MCP server (the MCP
SDK over streamable HTTP), each in its own process, and a TCP server that accepts and never
answers (the hung server of issue 11):

* **first-token delay** — median of (submit → first ``delta`` over SSE) over ``TURNS`` turns,
  each in a new conversation: with no MCP server; with the working server; with the hung
  server registered next to it (connect timeout 10 s: it is still on its first connection
  for the whole measurement); and the first turn right after the hung server was
  registered, the one turn that waits for it (``CHATMEM_MCP_FIRST_WAIT``).  Bar: a hung
  server adds less than 300 ms, the first turn included.
* **Stop while a tool call hangs** — ``POST /runs/{id}/stop`` while the working server's
  ``slow`` tool sleeps for a minute.  Bar: 2 s.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402
from tests.support.hung_server import hung_server  # noqa: E402
from tests.support.mcp_server import running_mcp_server, wait_until_ready  # noqa: E402
from tests.support.serve import ServeProcess, fake_profile, model_server_process  # noqa: E402

TURNS = 30
HUNG_BAR = 0.300
STOP_BAR = 2.0
failures: list[str] = []


def first_token(client: httpx.Client, profile_id: str) -> float:
    """Seconds from submitting a first message to its first ``delta`` event."""
    cid = client.post(
        "/api/v1/conversations", json={"title": "bench", "profile_id": profile_id}
    ).json()["id"]
    started = time.perf_counter()
    submitted = client.post(f"/api/v1/conversations/{cid}/turns", json={"content": "hi"})
    submitted.raise_for_status()
    run_id = submitted.json()["run_id"]
    took = None
    with client.stream("GET", f"/api/v1/runs/{run_id}/events") as response:
        for line in response.iter_lines():
            if took is None and line.startswith("event: delta"):
                took = time.perf_counter() - started
    if took is None:
        raise RuntimeError(f"run {run_id} streamed no text")
    return took


def median_first_token(client: httpx.Client, profile_id: str) -> float:
    first_token(client, profile_id)  # warms the caches of this configuration
    return statistics.median(first_token(client, profile_id) for _ in range(TURNS))


def stop_while_a_tool_hangs(client: httpx.Client, model: Any, profile_id: str) -> float:
    model.tool_call("slow", {"seconds": 60, "label": "bench-stop"}, id="call_slow")
    cid = client.post(
        "/api/v1/conversations", json={"title": "stop", "profile_id": profile_id}
    ).json()["id"]
    run_id = client.post(f"/api/v1/conversations/{cid}/turns", json={"content": "slow"}).json()[
        "run_id"
    ]
    with client.stream("GET", f"/api/v1/runs/{run_id}/events") as response:
        for line in response.iter_lines():
            if line.startswith("event: tool_call"):
                break
    time.sleep(0.3)  # the call is on its way to the tool server
    started = time.perf_counter()
    status = client.post(f"/api/v1/runs/{run_id}/stop").json()["status"]
    took = time.perf_counter() - started
    if status != "stopped":
        failures.append(f"stop answered {status!r}")
    return took


def main() -> int:
    with (
        tempfile.TemporaryDirectory() as tmp,
        model_server_process() as model,
        running_mcp_server(token="bench") as mcp,
        hung_server() as hung,
    ):
        server = ServeProcess(Path(tmp))
        server.start()
        try:
            model.set_default_reply("one two three")
            with server.signed_in("bench", admin=True) as client:
                profile_id = fake_profile(client, model.base_url)
                none = median_first_token(client, profile_id)
                working = client.post(
                    "/api/v1/mcp-servers",
                    json={"name": "tools", "url": mcp.url, "bearer_token": "bench"},
                ).json()["id"]
                wait_until_ready(client.get, working)
                with_working = median_first_token(client, profile_id)
                created = client.post(
                    "/api/v1/mcp-servers",
                    json={"name": "hung", "url": hung.url, "connect_timeout": 10},
                )
                created.raise_for_status()
                first_after_hung = first_token(client, profile_id)
                with_hung = median_first_token(client, profile_id)
                state = client.get(f"/api/v1/mcp-servers/{created.json()['id']}").json()
                stop = stop_while_a_tool_hangs(client, model, profile_id)
        finally:
            server.stop()
    print(f"first-token delay, no MCP server:                {none * 1000:8.1f} ms")
    print(f"first-token delay, one working MCP server:       {with_working * 1000:8.1f} ms")
    print(
        f"first-token delay, a hung server next to it:      {with_hung * 1000:8.1f} ms "
        f"(+{(with_hung - none) * 1000:.1f} ms; its state: {state['health']['state']})"
    )
    print(
        f"first turn right after registering the hung one: {first_after_hung * 1000:8.1f} ms "
        f"(+{(first_after_hung - none) * 1000:.1f} ms; bar +{HUNG_BAR * 1000:.0f} ms)"
    )
    print(f"Stop while a tool call hangs:                     {stop * 1000:8.1f} ms (bar 2 s)")
    for name, value in (("hung server", with_hung), ("first turn", first_after_hung)):
        if value - none > HUNG_BAR:
            failures.append(f"{name} adds {(value - none) * 1000:.0f} ms > {HUNG_BAR * 1000:.0f}")
    if stop > STOP_BAR:
        failures.append(f"Stop took {stop:.2f} s > {STOP_BAR:.0f} s")
    for failure in failures:
        print(f"FAILED: {failure}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
