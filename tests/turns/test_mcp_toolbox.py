"""The MCP toolbox on its own: discovery, authentication, and the endpoint policy (PROF-4)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from tests.support.mcp_server import McpServerProcess, running_mcp_server

from chatmem.security.endpoints import EndpointPolicy
from chatmem.settings import Settings
from chatmem.tools.mcp_links import McpPool
from chatmem.tools.toolbox import McpServerConfig, ToolBox


@pytest.fixture(scope="module")
def mcp() -> Iterator[McpServerProcess]:
    with running_mcp_server(token="s3cret") as server:
        yield server


def _open(mcp: McpServerProcess, settings: Settings, headers: dict[str, str]) -> ToolBox:
    """The tools a turn would get once the server's first connection ended either way."""
    import anyio

    async def go() -> ToolBox:
        pool = McpPool(EndpointPolicy.from_settings(settings))
        configs = [McpServerConfig("s1", "tools", mcp.url, headers)]
        (link,) = pool.sync(configs)
        await link.settled.wait()
        box = await pool.toolbox(configs)
        await pool.aclose()
        return box

    return anyio.run(go)


def test_tools_are_listed_as_openai_function_schemas_TURN_4(mcp: McpServerProcess) -> None:
    box = _open(mcp, Settings(allow_private_endpoints=True), {"Authorization": "Bearer s3cret"})
    names = {s["function"]["name"] for s in box.schemas}
    assert {"echo", "add", "slow"} <= names
    add = next(s for s in box.schemas if s["function"]["name"] == "add")
    assert add["type"] == "function" and set(add["function"]["parameters"]["required"]) == {
        "a",
        "b",
    }
    route = box.route("add")
    assert route is not None and route.server_id == "s1"


def test_a_server_refusing_our_credentials_offers_no_tools(mcp: McpServerProcess) -> None:
    box = _open(mcp, Settings(allow_private_endpoints=True), {"Authorization": "Bearer wrong"})
    assert box.schemas == []


def test_the_endpoint_policy_applies_to_mcp_urls_PROF_4(mcp: McpServerProcess) -> None:
    # Default policy: plain http on loopback is refused, so the server is skipped.
    box = _open(mcp, Settings(), {"Authorization": "Bearer s3cret"})
    assert box.schemas == []
    assert mcp.stats()["calls"] == {}
