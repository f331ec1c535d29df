"""Seed 003 («Perkiraan konservatif … memperhitungkan definisi alat»): the tools are counted
before the first turn.

Each MCP server's last known tool list is kept with its record, so after a restart the
counter (``GET …/context``) counts the tools a turn will send — not only the built-in recall
tool — before any turn, and counts the last known list of a server that is down.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from mcp.server.mcpserver import Context, MCPServer
from tests.support.mcp_server import running_mcp_server, wait_until_ready
from tests.support.model_server import FakeModelServer
from tests.turns.conftest import Chat, make_chat

from chatmem.context import count_tools
from chatmem.context.recall import with_recall
from chatmem.context.tokens import EstimateTokenizer
from chatmem.settings import Settings
from chatmem.store.tables.profiles import McpServer
from chatmem.tools.known import stored_tools
from chatmem.tools.toolbox import KnownTool
from chatmem.web.app import create_app

TOKEN = "known-tools"


def _context(client: TestClient, chat: Chat) -> dict[str, Any]:
    response = client.get(
        f"/api/v1/conversations/{chat.conversation_id}/context", headers=chat.headers
    )
    assert response.status_code == 200, response.text
    return dict(response.json())


def _profile_context(client: TestClient, chat: Chat) -> dict[str, Any]:
    response = client.get(f"/api/v1/profiles/{chat.profile_id}/context", headers=chat.headers)
    assert response.status_code == 200, response.text
    return dict(response.json())


@pytest.fixture
def listed_once(
    turn_settings: Settings, model_server: FakeModelServer
) -> Iterator[tuple[Chat, dict[str, Any], Any]]:
    """An app that registered an MCP server and listed its tools (no turn), then stopped;
    yields the chat, the plan it answered, and the still running MCP server."""
    with running_mcp_server(token=TOKEN) as mcp:
        with TestClient(create_app(turn_settings)) as client:
            chat = make_chat(client, model_server, admin=True)
            created = client.post(
                "/api/v1/mcp-servers",
                json={"name": "tools", "url": mcp.url, "bearer_token": TOKEN},
                headers=chat.headers,
            )
            assert created.status_code == 201, created.text
            wait_until_ready(
                lambda path: client.get(path, headers=chat.headers), created.json()["id"]
            )
            before = _context(client, chat)
        # The live list counts before any turn; more than the built-in recall tool alone.
        recall_only = count_tools(with_recall((), True), EstimateTokenizer())
        assert before["tokens"]["tools"] > recall_only
        # Closing the app waited for the list to be written with the server's record.
        yield chat, before, mcp


def test_tools_are_counted_after_a_restart_before_any_turn(
    turn_settings: Settings, listed_once: tuple[Chat, dict[str, Any], Any]
) -> None:
    chat, listed, _mcp = listed_once
    with TestClient(create_app(turn_settings)) as client:
        chat.client = client
        restarted = _context(client, chat)
        assert restarted["tokens"]["tools"] == listed["tokens"]["tools"]
        new_chat = _profile_context(client, chat)
        assert new_chat["tokens"]["tools"] == listed["tokens"]["tools"]
        # What the first turn sends, once the session is up again, is what was counted.
        server_id = client.get("/api/v1/mcp-servers", headers=chat.headers).json()["items"][0]
        wait_until_ready(lambda path: client.get(path, headers=chat.headers), server_id["id"])
        chat.model.reply("Hello.")
        assert chat.turn("Hi")["status"] == "completed"
        sent = chat.model.chat_requests[-1].body["tools"]
        assert {t["function"]["name"] for t in sent} >= {"echo", "add", "recall"}
        assert _context(client, chat)["tokens"]["tools"] == restarted["tokens"]["tools"]
        with client.app.state.db.session() as session:  # type: ignore[attr-defined]
            row = session.query(McpServer).one()
            stored = {tool.name for tool in stored_tools(row.known_tools)}
            assert row.tools_listed_at is not None
        assert stored == {t["function"]["name"] for t in sent} - {"recall"}


def test_a_server_down_at_restart_counts_its_last_known_tools(
    turn_settings: Settings, listed_once: tuple[Chat, dict[str, Any], Any]
) -> None:
    chat, listed, mcp = listed_once
    mcp.stop()  # the restarted app cannot list them: the last known list counts, not none
    with TestClient(create_app(turn_settings)) as client:
        chat.client = client
        assert _context(client, chat)["tokens"]["tools"] == listed["tokens"]["tools"]


def test_the_allow_list_applies_to_the_stored_tools(
    turn_settings: Settings, listed_once: tuple[Chat, dict[str, Any], Any]
) -> None:
    chat, listed, mcp = listed_once
    mcp.stop()
    with TestClient(create_app(turn_settings)) as client:
        chat.client = client
        server_id = client.get("/api/v1/mcp-servers", headers=chat.headers).json()["items"][0]["id"]
        changed = client.patch(
            f"/api/v1/mcp-servers/{server_id}",
            json={"allowed_tools": ["add"]},
            headers=chat.headers,
        )
        assert changed.status_code == 200, changed.text
        fewer = _context(client, chat)["tokens"]["tools"]
        assert 0 < fewer < listed["tokens"]["tools"]


def test_a_stored_list_that_is_not_one_counts_what_it_holds() -> None:
    value = [
        {"name": "add", "description": "Add.", "input_schema": {"type": "object"}},
        {"description": "no name"},
        "not a tool",
        {"name": "bare", "description": 3, "input_schema": []},
    ]
    assert stored_tools(value) == (
        KnownTool("add", "Add.", {"type": "object"}),
        KnownTool("bare"),
    )
    assert stored_tools({"name": "add"}) == ()
    assert stored_tools(None) == ()
    assert KnownTool.parse(KnownTool("x", "y", {"a": 1}).to_json()) == KnownTool("x", "y", {"a": 1})


def _growing_server() -> tuple[Any, Any]:
    """An MCP server whose ``grow`` tool adds a tool and says its list changed."""
    from mcp.server.transport_security import TransportSecuritySettings

    server = MCPServer("growing")

    def extra(text: str) -> str:
        """A tool that was not there at first."""
        return text

    @server.tool()
    async def grow(ctx: Context) -> str:  # type: ignore[type-arg]
        """Add a tool."""
        server.add_tool(extra)
        await ctx.session.send_tool_list_changed()
        return "grown"

    security = TransportSecuritySettings(enable_dns_rebinding_protection=False)
    return server, server.streamable_http_app(transport_security=security)


@pytest.fixture
def growing_url() -> Iterator[str]:
    import socket
    import threading

    import uvicorn

    _server, app = _growing_server()
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)  # connections wait in the backlog until the server serves: no race
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


def test_a_changed_tool_list_is_listed_again_at_once(growing_url: str) -> None:
    """``notifications/tools/list_changed``: the link lists again without waiting for its
    periodic listing (an hour here), and hands the new list on to be kept."""
    import anyio

    from chatmem.security.endpoints import EndpointPolicy
    from chatmem.tools.mcp_links import McpPool
    from chatmem.tools.toolbox import McpServerConfig

    async def go() -> list[set[str]]:
        lists: list[set[str]] = []
        grown = anyio.Event()

        def listed(server_id: str, tools: tuple[Any, ...]) -> None:
            lists.append({tool.name for tool in tools})
            if "extra" in lists[-1]:
                grown.set()

        policy = EndpointPolicy.from_settings(Settings(allow_private_endpoints=True))
        pool = McpPool(policy, refresh=3600.0, on_listed=listed)
        (link,) = pool.sync([McpServerConfig("g1", "growing", growing_url)])
        try:
            with anyio.fail_after(20):
                await link.settled.wait()
                assert await link.call("grow", {}) is not None
                await grown.wait()
        finally:
            await pool.aclose()
        return lists

    lists = anyio.run(go)
    assert lists[0] == {"grow"} and lists[-1] == {"grow", "extra"}
