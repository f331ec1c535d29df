"""The MCP servers turns' tools come from (PROV-3), for the app's life.

One long-lived link per enabled server (:class:`~chatmem.tools.mcp_links.McpPool`) and the
tools each one last listed (:class:`~chatmem.tools.known.KnownTools`, seed 003), both brought
in line with the database after start-up and whenever an administrator changes a server
(:meth:`ToolServers.sync`, in the background).  A turn's toolbox is the cached tools of the
servers ready now: a hung server costs it nothing.
"""

from __future__ import annotations

import asyncio
import logging

from chatmem.security.endpoints import EndpointPolicy
from chatmem.security.secret_box import SecretBox
from chatmem.settings import Settings
from chatmem.store.db import Database
from chatmem.store.units import read
from chatmem.tools.known import KnownTools
from chatmem.tools.mcp_links import McpPool
from chatmem.tools.toolbox import McpServerConfig, ToolBox, read_mcp_servers

log = logging.getLogger(__name__)


class ToolServers:
    """The app's MCP servers: their links (:attr:`mcp`) and last known lists (:attr:`known`)."""

    def __init__(
        self, db: Database, settings: Settings, secrets: SecretBox, policy: EndpointPolicy
    ) -> None:
        self._db = db
        self._settings = settings
        self._secrets = secrets
        #: Seed 003: the tools a turn would offer by each server's last known list, for the
        #: context endpoint's Tools row from the start (kept with the servers' records).
        self.known = KnownTools(db)
        #: PROV-3: one long-lived session per enabled MCP server, for the app's life.
        self.mcp = McpPool(
            policy,
            refresh=settings.mcp_refresh_interval,
            first_wait=settings.mcp_first_wait,
            on_listed=self.known.listed,
        )
        self._sync: asyncio.Task[None] | None = None

    async def toolbox(self, servers: list[McpServerConfig] | None = None) -> ToolBox:
        """A turn's toolbox from ``servers`` (read at its admission; None: read them now)."""
        if servers is None:
            enabled, stored = await read(self._db, read_mcp_servers, self._settings, self._secrets)
            self.known.servers(enabled, stored)
        else:
            enabled = servers
            self.known.servers(enabled)
        # PROV-3: the cached tools of the servers ready now; a hung one costs nothing here.
        return await self.mcp.toolbox(enabled)

    def sync(self) -> None:
        """Reads the enabled MCP servers and brings the links in line, in the background
        (on the loop)."""

        async def sync() -> None:
            try:
                servers, stored = await read(
                    self._db, read_mcp_servers, self._settings, self._secrets
                )
                self.known.servers(servers, stored)
                self.mcp.sync(servers)
            except Exception:  # the next turn syncs again
                log.exception("reading the MCP servers failed")

        self._sync = asyncio.ensure_future(sync())
        self.known.reading(self._sync)

    async def aclose(self) -> None:
        await self.mcp.aclose()
        await self.known.aclose()
