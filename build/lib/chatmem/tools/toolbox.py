"""What a tool is for a turn (TURN-4, PROV-3, PROV-6): the toolbox, its routes and outcomes.

A turn's runner sees one :class:`ToolBox`: the OpenAI function schemas it offers (the engine
counts them in the plan's Tools row), where each name leads (:class:`ToolRoute`), and a call
that answers a :class:`ToolOutcome` — never an exception.  The default box has no tools;
the MCP servers' box (:class:`~chatmem.tools.mcp_links.McpToolBox`, over the long-lived
links), the client's tools (:mod:`chatmem.tools.client`) and ``recall``
(:mod:`chatmem.tools.recall`) are boxes too.  This module imports none of them: the rooms'
arrows point here.

Administrators register MCP servers (streamable HTTP; URL and headers stored encrypted by
the profiles room); :func:`read_mcp_servers` reads the enabled ones as
:class:`McpServerConfig`.  What is offered follows each server's policy (PROV-6): an
allow-list of its tools (absent: all), and tools marked "ask first", which the runner pauses
on until the user approves; :func:`offered` applies it, for a turn's box and for the plans
before any turn alike.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from chatmem.security.secret_box import SecretBox
from chatmem.settings import Settings
from chatmem.store.mcp_servers import McpServerRecord
from chatmem.store.sessions import Handle, Session
from chatmem.tools.apps import ToolApp, app_of, tool_app
from chatmem.tools.results import ToolAttachment

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
    #: APPS-1: the server's tools show their apps; APPS-4: its workspace tool (or None);
    #: APPS-2: the browser permissions an app of this server may be granted.
    show_apps: bool = True
    workspace_tool: str | None = None
    app_permissions: frozenset[str] = frozenset()

    @property
    def connection_key(self) -> tuple[Any, ...]:
        """What a session depends on: a change reconnects, a policy change does not."""
        return (self.url, tuple(sorted(self.headers.items())), self.connect_timeout)

    def offers(self, tool: str) -> bool:
        return self.allowed_tools is None or tool in self.allowed_tools


@dataclass(frozen=True)
class KnownTool:
    """One tool as its server lists it: what the model is sent of it (seed 003: stored with
    the server's record, so plans count it before a session lists it again), and its app
    (APPS-1: the ``ui://`` resource and who may call it)."""

    name: str
    description: str = ""
    input_schema: Mapping[str, Any] | None = None
    app: ToolApp | None = None

    @classmethod
    def of(cls, tool: Any) -> KnownTool:
        """From the SDK's ``Tool`` (or anything with its attributes)."""
        schema = getattr(tool, "input_schema", None)
        return cls(
            str(tool.name),
            getattr(tool, "description", None) or "",
            schema or None,
            tool_app(getattr(tool, "meta", None)),
        )

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
            ToolApp.parse(value.get("app")),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "input_schema": dict(self.input_schema) if self.input_schema else None,
            "app": self.app.to_json() if self.app is not None else None,
        }


def offered(
    servers: Sequence[tuple[McpServerConfig, Sequence[Any]]],
) -> tuple[list[dict[str, Any]], dict[str, ToolRoute]]:
    """The OpenAI function schemas of these servers' tools (each server's allow-list applied,
    a name taken by an earlier server prefixed with the server's name), and where each leads.
    A tool only its app may call (``_meta.ui.visibility`` without ``"model"``) is never
    offered (APPS-1).  A turn's toolbox and the plans before any turn both use it: they
    count the same thing."""
    routes: dict[str, ToolRoute] = {}
    schemas: list[dict[str, Any]] = []
    for config, tools in servers:
        for tool in tools:
            app = app_of(tool)
            if not config.offers(tool.name) or (app is not None and not app.for_model):
                continue
            name = _NAME_OK.sub("_", tool.name)[:64]
            if name in routes:
                name = _NAME_OK.sub("_", f"{config.name}_{tool.name}")[:64]
            routes[name] = ToolRoute(
                config.id,
                config.name,
                tool.name,
                tool.name in config.ask_first_tools,
                app,
                config.show_apps,
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
    #: APPS-1: the whole ``CallToolResult`` as the server returned it (its JSON), for the
    #: tool's app; None when no server answered.
    result: dict[str, Any] | None = None


@dataclass(frozen=True)
class ToolRoute:
    """Where an offered tool name leads (for the runner's record and its approval step)."""

    server_id: str
    server_name: str
    tool: str
    ask_first: bool = False
    #: APPS-1: the tool's app (None: it has none), and whether its server shows apps.
    app: ToolApp | None = None
    show_apps: bool = True

    @property
    def shown_app(self) -> dict[str, str] | None:
        """The app as the feed is told of it (None: no app, or its server shows none)."""
        if self.app is None or not self.show_apps:
            return None
        return {"resource_uri": self.app.resource_uri}


class ToolBox:
    """No tools: the default when no MCP server is configured."""

    schemas: Sequence[Mapping[str, Any]] = ()

    def route(self, name: str) -> ToolRoute | None:
        return None

    async def call(self, name: str, arguments: str) -> ToolOutcome:
        return ToolOutcome(f"Unknown tool {name!r}.", is_error=True)

    async def aclose(self) -> None:
        return None


def load_mcp_servers(
    session: Handle, settings: Settings, secrets: SecretBox
) -> list[McpServerConfig]:
    """The enabled MCP servers with decrypted headers (the profiles room's repository)."""
    return read_mcp_servers(session, settings, secrets)[0]


def read_mcp_servers(
    session: Handle, settings: Settings, secrets: SecretBox
) -> tuple[list[McpServerConfig], list[tuple[str, Any]]]:
    """:func:`load_mcp_servers`, and each enabled server's stored tool list (its JSON)."""
    from chatmem.store.mcp_servers import enabled_servers

    configs: list[McpServerConfig] = []
    rows = enabled_servers(session)
    for row in rows:
        config = _config(row, settings, secrets)
        if config is not None:
            configs.append(config)
    return configs, [(row.id, row.known_tools) for row in rows]


def server_config(
    session: Session, settings: Settings, secrets: SecretBox, server_id: str
) -> tuple[McpServerConfig, Any] | None:
    """One server as :func:`read_mcp_servers` reads it, with its stored tool list (None:
    removed or disabled)."""
    from chatmem.errors import NotFound
    from chatmem.store.mcp_servers import get_server

    try:
        row = get_server(session, server_id)
    except NotFound:
        return None
    config = _config(row, settings, secrets) if row.enabled else None
    return (config, row.known_tools) if config is not None else None


def _config(row: McpServerRecord, settings: Settings, secrets: SecretBox) -> McpServerConfig | None:
    from chatmem.models import mcp_servers

    try:
        conn = mcp_servers.connection(row, secrets)
    except Exception:
        log.warning("MCP server %s: stored headers cannot be decrypted; skipped", row.name)
        return None
    allowed = row.allowed_tools
    return McpServerConfig(
        id=conn.id,
        name=conn.name,
        url=conn.url,
        headers=dict(conn.headers),
        connect_timeout=float(row.connect_timeout or settings.mcp_connect_timeout),
        call_timeout=float(row.call_timeout or settings.mcp_call_timeout),
        allowed_tools=frozenset(allowed) if allowed is not None else None,
        ask_first_tools=frozenset(row.ask_first_tools or ()),
        show_apps=row.show_apps,
        workspace_tool=row.workspace_tool,
        app_permissions=frozenset(row.app_permissions or ()),
    )
