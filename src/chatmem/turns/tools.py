"""MCP tools for a turn (TURN-4): discovery, the OpenAI tool schemas, and calls.

Administrators register MCP servers (streamable HTTP; URL and headers stored encrypted by
the profiles room).  For each turn a :class:`McpToolBox` connects to every enabled server
through the MCP SDK's client, lists the tools, offers them to the model as OpenAI function
schemas (the engine counts them in the plan's Tools row), and routes each call to the server
that owns the tool.  A server that cannot be reached is skipped — its tools are simply not
offered — so one broken server does not break every chat.

Connections obey the endpoint policy (PROF-4): the SDK's HTTP client (httpx2) gets a network
backend that resolves through :class:`~chatmem.models.ssrf.EndpointPolicy` and connects to
the address it checked, the same pinning the model client uses; redirects are not followed.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio

from chatmem.models.ssrf import EndpointPolicy, connect_checked

log = logging.getLogger(__name__)

_NAME_OK = re.compile(r"[^a-zA-Z0-9_-]")


@dataclass(frozen=True)
class McpServerConfig:
    """One enabled MCP server, secrets decrypted (in memory only)."""

    id: str
    name: str
    url: str
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)


@dataclass(frozen=True)
class ToolOutcome:
    text: str
    is_error: bool = False


class ToolBox:
    """No tools: the default when no MCP server is configured."""

    schemas: Sequence[Mapping[str, Any]] = ()

    def server_for(self, name: str) -> str | None:
        return None

    async def call(self, name: str, arguments: str) -> ToolOutcome:
        return ToolOutcome(f"Unknown tool {name!r}.", is_error=True)

    async def aclose(self) -> None:
        return None


def _pinned_http_client(policy: EndpointPolicy, headers: Mapping[str, str]) -> Any:
    """An httpx2 client for the MCP SDK whose connections go to policy-checked addresses."""
    import httpcore2
    import httpx2

    class PinnedBackend(httpcore2.AsyncNetworkBackend):
        def __init__(self) -> None:
            self._inner = httpcore2.AnyIOBackend()

        async def connect_tcp(
            self,
            host: str,
            port: int,
            timeout: float | None = None,
            local_address: str | None = None,
            socket_options: Any = None,
        ) -> Any:
            return await connect_checked(
                policy,
                self._inner,
                host,
                port,
                (httpcore2.ConnectError, httpcore2.ConnectTimeout),
                timeout=timeout,
                local_address=local_address,
                socket_options=socket_options,
            )

        async def connect_unix_socket(self, *args: Any, **kwargs: Any) -> Any:
            raise httpcore2.ConnectError("unix sockets are not allowed")

        async def sleep(self, seconds: float) -> None:
            await self._inner.sleep(seconds)

    transport = httpx2.AsyncHTTPTransport(trust_env=False)
    transport._pool = httpcore2.AsyncConnectionPool(  # same pool, our network backend
        ssl_context=httpx2.create_ssl_context() if hasattr(httpx2, "create_ssl_context") else None,
        network_backend=PinnedBackend(),
    )
    return httpx2.AsyncClient(
        transport=transport,
        headers=dict(headers),
        timeout=httpx2.Timeout(30.0, read=300.0),
        follow_redirects=False,
        trust_env=False,
    )


def _result_text(result: Any) -> str:
    parts: list[str] = []
    for block in getattr(result, "content", None) or []:
        text = getattr(block, "text", None)
        if isinstance(text, str):
            parts.append(text)
        else:
            dump = block.model_dump(mode="json") if hasattr(block, "model_dump") else str(block)
            parts.append(
                json.dumps(dump, ensure_ascii=False) if not isinstance(dump, str) else dump
            )
    if not parts and getattr(result, "structured_content", None) is not None:
        parts.append(json.dumps(result.structured_content, ensure_ascii=False))
    return "\n".join(parts)


class McpToolBox(ToolBox):
    """Sessions to the configured MCP servers, open for the duration of one turn."""

    def __init__(self) -> None:
        self._stack = contextlib.AsyncExitStack()
        self._clients: dict[str, Any] = {}
        self._routes: dict[str, tuple[str, str]] = {}  # offered name -> (server id, tool name)
        self.schemas: list[dict[str, Any]] = []

    @classmethod
    async def open(
        cls, servers: Iterable[McpServerConfig], policy: EndpointPolicy, *, timeout: float = 15.0
    ) -> McpToolBox:
        box = cls()
        for server in servers:
            try:
                with anyio.fail_after(timeout):
                    await box._connect(server, policy)
            except Exception as exc:  # one broken server must not break the chat
                log.warning("MCP server %s unavailable: %s", server.name, type(exc).__name__)
        return box

    async def _connect(self, server: McpServerConfig, policy: EndpointPolicy) -> None:
        from mcp import Client
        from mcp.client.streamable_http import streamable_http_client

        policy.check_syntax(server.url)
        http = _pinned_http_client(policy, server.headers)
        stack = contextlib.AsyncExitStack()
        await stack.enter_async_context(http)
        client = await stack.enter_async_context(
            Client(streamable_http_client(server.url, http_client=http), mode="legacy")
        )
        listed = await client.list_tools()
        self._stack.push_async_callback(stack.aclose)
        self._clients[server.id] = client
        for tool in listed.tools:
            offered = _NAME_OK.sub("_", tool.name)[:64]
            if offered in self._routes:
                offered = _NAME_OK.sub("_", f"{server.name}_{tool.name}")[:64]
            self._routes[offered] = (server.id, tool.name)
            self.schemas.append(
                {
                    "type": "function",
                    "function": {
                        "name": offered,
                        "description": tool.description or "",
                        "parameters": tool.input_schema or {"type": "object", "properties": {}},
                    },
                }
            )

    def server_for(self, name: str) -> str | None:
        route = self._routes.get(name)
        return route[0] if route else None

    async def call(self, name: str, arguments: str) -> ToolOutcome:
        route = self._routes.get(name)
        if route is None:
            return ToolOutcome(f"Unknown tool {name!r}.", is_error=True)
        try:
            args = json.loads(arguments or "{}")
        except ValueError:
            return ToolOutcome("The tool arguments were not valid JSON.", is_error=True)
        if not isinstance(args, dict):
            return ToolOutcome("The tool arguments must be a JSON object.", is_error=True)
        server_id, tool = route
        try:
            result = await self._clients[server_id].call_tool(tool, args)
        except Exception as exc:
            return ToolOutcome(
                f"The tool failed: {type(exc).__name__}: {exc}"[:2000], is_error=True
            )
        return ToolOutcome(_result_text(result), is_error=bool(getattr(result, "is_error", False)))

    async def aclose(self) -> None:
        with contextlib.suppress(Exception):
            await self._stack.aclose()


def offered_schemas(boxes: Sequence[ToolBox]) -> list[Mapping[str, Any]]:
    return [schema for box in boxes for schema in box.schemas]


def load_mcp_servers(session: Any, settings: Any, secrets: Any) -> list[McpServerConfig]:
    """The enabled MCP servers with decrypted headers (the profiles room's repository)."""
    from chatmem.models import mcp_servers

    configs: list[McpServerConfig] = []
    for row in mcp_servers.enabled_rows(session):
        try:
            conn = mcp_servers.connection(row, secrets)
        except Exception:
            log.warning("MCP server %s: stored headers cannot be decrypted; skipped", row.name)
            continue
        configs.append(
            McpServerConfig(id=conn.id, name=conn.name, url=conn.url, headers=dict(conn.headers))
        )
    return configs
