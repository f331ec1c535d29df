"""MCP tools for a turn (TURN-4, PROV-3, PROV-6): the OpenAI tool schemas, and calls.

Administrators register MCP servers (streamable HTTP; URL and headers stored encrypted by
the profiles room).  Each enabled server has one long-lived session owned by a
:class:`~chatmem.tools.mcp_links.ServerLink` (kept by the turn service for the app's life);
a turn gets a :class:`McpToolBox` — a snapshot of the tools the ready servers listed, as
OpenAI function schemas (the engine counts them in the plan's Tools row) — and each call is
routed to the link of the server that owns the tool.  A server that cannot be reached, or
hangs, is simply not offered: one broken server does not break every chat.

What is offered follows each server's policy (PROV-6): an allow-list of its tools (absent:
all), and tools marked "ask first", which the runner pauses on until the user approves.

Connections obey the endpoint policy (PROF-4): the SDK's HTTP client (httpx2) gets a network
backend that resolves through :class:`~chatmem.security.endpoints.EndpointPolicy` and connects to
the address it checked, the same pinning the model client uses; redirects are not followed.
"""

from __future__ import annotations

import functools
import json
import logging
import re
import ssl
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from chatmem.security.endpoints import EndpointPolicy, connect_checked
from chatmem.tools.results import ToolAttachment, tool_content

if TYPE_CHECKING:
    from chatmem.tools.mcp_links import ServerLink

log = logging.getLogger(__name__)

_NAME_OK = re.compile(r"[^a-zA-Z0-9_-]")


@dataclass(frozen=True)
class McpServerConfig:
    """One enabled MCP server, secrets decrypted (in memory only)."""

    id: str
    name: str
    url: str
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)
    #: PROV-3: seconds to connect and list the tools; seconds one call may take.
    connect_timeout: float = 10.0
    call_timeout: float = 120.0
    #: PROV-6: the tools offered (None: all of them), and those the user approves first.
    allowed_tools: frozenset[str] | None = None
    ask_first_tools: frozenset[str] = frozenset()

    @property
    def connection_key(self) -> tuple[Any, ...]:
        """What a session depends on: a change reconnects, a policy change does not."""
        return (self.url, tuple(sorted(self.headers.items())), self.connect_timeout)

    def offers(self, tool: str) -> bool:
        return self.allowed_tools is None or tool in self.allowed_tools


@dataclass(frozen=True)
class KnownTool:
    """One tool as its server lists it: what the model is sent of it (seed 003: stored with
    the server's record, so plans count it before a session lists it again)."""

    name: str
    description: str = ""
    input_schema: Mapping[str, Any] | None = None

    @classmethod
    def of(cls, tool: Any) -> KnownTool:
        """From the SDK's ``Tool`` (or anything with its three attributes)."""
        schema = getattr(tool, "input_schema", None)
        return cls(str(tool.name), getattr(tool, "description", None) or "", schema or None)

    @classmethod
    def parse(cls, value: Any) -> KnownTool | None:
        """From its stored JSON; None for a value that is not one (never an error)."""
        if not isinstance(value, Mapping) or not isinstance(value.get("name"), str):
            return None
        description = value.get("description")
        schema = value.get("input_schema")
        return cls(
            value["name"],
            description if isinstance(description, str) else "",
            schema if isinstance(schema, Mapping) and schema else None,
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "input_schema": dict(self.input_schema) if self.input_schema else None,
        }


def offered(
    servers: Sequence[tuple[McpServerConfig, Sequence[Any]]],
) -> tuple[list[dict[str, Any]], dict[str, ToolRoute]]:
    """The OpenAI function schemas of these servers' tools (each server's allow-list applied,
    a name taken by an earlier server prefixed with the server's name), and where each leads.
    A turn's toolbox and the plans before any turn both use it: they count the same thing."""
    routes: dict[str, ToolRoute] = {}
    schemas: list[dict[str, Any]] = []
    for config, tools in servers:
        for tool in tools:
            if not config.offers(tool.name):
                continue
            name = _NAME_OK.sub("_", tool.name)[:64]
            if name in routes:
                name = _NAME_OK.sub("_", f"{config.name}_{tool.name}")[:64]
            routes[name] = ToolRoute(
                config.id, config.name, tool.name, tool.name in config.ask_first_tools
            )
            schemas.append(
                {
                    "type": "function",
                    "function": {
                        "name": name,
                        "description": tool.description or "",
                        "parameters": tool.input_schema or {"type": "object", "properties": {}},
                    },
                }
            )
    return schemas, routes


@dataclass(frozen=True)
class ToolOutcome:
    text: str
    is_error: bool = False
    #: The call may or may not have happened (it timed out): never repeated automatically.
    unknown: bool = False
    #: Images and other binary parts of the result, stored as files of the tool message;
    #: ``text`` holds a placeholder for each (PROV-4).
    attachments: tuple[ToolAttachment, ...] = ()


@dataclass(frozen=True)
class ToolRoute:
    """Where an offered tool name leads (for the runner's record and its approval step)."""

    server_id: str
    server_name: str
    tool: str
    ask_first: bool = False


class ToolBox:
    """No tools: the default when no MCP server is configured."""

    schemas: Sequence[Mapping[str, Any]] = ()

    def route(self, name: str) -> ToolRoute | None:
        return None

    async def call(self, name: str, arguments: str) -> ToolOutcome:
        return ToolOutcome(f"Unknown tool {name!r}.", is_error=True)

    async def aclose(self) -> None:
        return None


@functools.cache
def _ssl_context() -> ssl.SSLContext:
    """One verifying context for every MCP connection: loading the CA bundle takes tens of
    milliseconds, which each (re)connection would otherwise spend on the event loop."""
    import httpx2

    return httpx2.create_ssl_context(trust_env=False)


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

    ssl_context = _ssl_context()
    transport = httpx2.AsyncHTTPTransport(verify=ssl_context, trust_env=False)
    transport._pool = httpcore2.AsyncConnectionPool(  # same pool, our network backend
        ssl_context=ssl_context,
        network_backend=PinnedBackend(),
    )
    return httpx2.AsyncClient(
        transport=transport,
        headers=dict(headers),
        timeout=httpx2.Timeout(30.0, read=300.0),
        follow_redirects=False,
        trust_env=False,
    )


class McpToolBox(ToolBox):
    """The tools of the ready MCP servers for one turn: a snapshot of their cached lists,
    filtered by each server's allow-list.  Calls go to the server's long-lived link; closing
    the box closes nothing (the links belong to the turn service)."""

    def __init__(self, links: Sequence[ServerLink]) -> None:
        self._links = {link.config.id: link for link in links}
        self.schemas, self._routes = offered([(link.config, link.tools) for link in links])

    def route(self, name: str) -> ToolRoute | None:
        return self._routes.get(name)

    async def call(self, name: str, arguments: str) -> ToolOutcome:
        from chatmem.tools.mcp_links import CallLost, CallTimedOut, ServerUnavailable

        route = self._routes.get(name)
        if route is None:
            return ToolOutcome(f"Unknown tool {name!r}.", is_error=True)
        try:
            args = json.loads(arguments or "{}")
        except ValueError:
            return ToolOutcome("The tool arguments were not valid JSON.", is_error=True)
        if not isinstance(args, dict):
            return ToolOutcome("The tool arguments must be a JSON object.", is_error=True)
        try:
            result = await self._links[route.server_id].call(route.tool, args)
        except CallTimedOut as exc:
            return ToolOutcome(
                f"The tool did not answer within {exc.seconds:g} s. Its result is unknown; "
                "it was not repeated automatically.",
                is_error=True,
                unknown=True,
            )
        except CallLost:
            return ToolOutcome(
                f"The result of this tool call is unknown: the connection to the MCP server "
                f"{route.server_name!r} ended during the call. It was not repeated "
                "automatically.",
                is_error=True,
                unknown=True,
            )
        except ServerUnavailable as exc:
            return ToolOutcome(
                f"The tool was not called: the MCP server {route.server_name!r} is "
                f"unavailable ({exc.reason}).",
                is_error=True,
            )
        except Exception as exc:
            return ToolOutcome(
                f"The tool failed: {type(exc).__name__}: {exc}"[:2000], is_error=True
            )
        content = tool_content(result, route.tool)  # binary parts as attachments (PROV-4)
        return ToolOutcome(
            content.text,
            is_error=bool(getattr(result, "is_error", False)),
            attachments=content.attachments,
        )


def load_mcp_servers(session: Any, settings: Any, secrets: Any) -> list[McpServerConfig]:
    """The enabled MCP servers with decrypted headers (the profiles room's repository)."""
    return read_mcp_servers(session, settings, secrets)[0]


def read_mcp_servers(
    session: Any, settings: Any, secrets: Any
) -> tuple[list[McpServerConfig], list[tuple[str, Any]]]:
    """:func:`load_mcp_servers`, and each enabled server's stored tool list (its JSON)."""
    from chatmem.models import mcp_servers

    configs: list[McpServerConfig] = []
    rows = mcp_servers.enabled_rows(session)
    for row in rows:
        try:
            conn = mcp_servers.connection(row, secrets)
        except Exception:
            log.warning("MCP server %s: stored headers cannot be decrypted; skipped", row.name)
            continue
        allowed = row.allowed_tools
        configs.append(
            McpServerConfig(
                id=conn.id,
                name=conn.name,
                url=conn.url,
                headers=dict(conn.headers),
                connect_timeout=float(row.connect_timeout or settings.mcp_connect_timeout),
                call_timeout=float(row.call_timeout or settings.mcp_call_timeout),
                allowed_tools=frozenset(allowed) if allowed is not None else None,
                ask_first_tools=frozenset(row.ask_first_tools or ()),
            )
        )
    return configs, [(row.id, row.known_tools) for row in rows]
