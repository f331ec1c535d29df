"""The tool definitions every plan counts, known from the start (seed 003: «Perkiraan
konservatif … memperhitungkan definisi alat»).

A plan (``GET …/context``, the counter) must count the tools a turn will offer, yet listing
them on every keystroke is far too slow, and after a restart no session has listed them yet.
So each MCP server's last known list is kept with its record (``mcp_servers.known_tools``)
and :class:`KnownTools` holds, in memory, the enabled servers and one list per server:

- the stored list, read with the servers (at start-up, after an administrator's change, at
  every turn);
- replaced by each list a session gives — its first listing, the periodic ones, one after
  ``notifications/tools/list_changed`` — which is written back to the record when it changed,
  or to confirm it now and then (:data:`CONFIRM_AFTER`).

A list this process has not seen is counted as the last known one, never as none: a server
that is down still counts (conservatively) what it offered last.  The schemas are built by
:func:`~chatmem.tools.toolbox.offered`, the turn's toolbox's own function, so the plan counts
what a turn sends.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable, Sequence
from typing import Any

from chatmem.store.db import Database
from chatmem.store.mcp_tools import save_known_tools
from chatmem.store.types import utcnow
from chatmem.store.units import work
from chatmem.tools.toolbox import KnownTool, McpServerConfig, offered

log = logging.getLogger(__name__)

#: Seconds after which a list listed again unchanged is written again (its time confirmed).
CONFIRM_AFTER = 3600.0
#: Seconds a plan waits at most for a read of the servers on its way.
READ_WAIT = 10.0


def stored_tools(value: Any) -> tuple[KnownTool, ...]:
    """A server's stored list; what is not a tool (a hand-edited row) is left out."""
    if not isinstance(value, list):
        return ()
    tools = (KnownTool.parse(item) for item in value)
    return tuple(tool for tool in tools if tool is not None)


class KnownTools:
    """The enabled servers and each one's last known tools (see the module docstring)."""

    def __init__(self, db: Database) -> None:
        self._db = db
        self._servers: list[McpServerConfig] = []
        self._lists: dict[str, tuple[KnownTool, ...]] = {}
        #: The servers a session listed in this process: their list is newer than the record's.
        self._live: set[str] = set()
        #: When each server's list was last written from here (monotonic seconds).
        self._written: dict[str, float] = {}
        self._schemas: list[dict[str, Any]] = []
        self._reading: asyncio.Future[Any] | None = None
        self._writing: set[asyncio.Task[None]] = set()
        self._write_lock = asyncio.Lock()

    @property
    def schemas(self) -> list[dict[str, Any]]:
        """The OpenAI tool schemas a turn would offer, by the last known lists."""
        return self._schemas

    def reading(self, task: asyncio.Future[Any]) -> None:
        """A read of the servers is on its way (start-up, an administrator's change)."""
        self._reading = task

    async def ready_schemas(self) -> list[dict[str, Any]]:
        """:attr:`schemas`, once a read of the servers on its way has ended: a plan asked
        for right after start-up must not count none, nor one asked for right after an
        administrator's change count the old policy."""
        task = self._reading
        if task is not None and not task.done():
            await asyncio.wait({task}, timeout=READ_WAIT)
        return self._schemas

    def servers(
        self, configs: Sequence[McpServerConfig], stored: Iterable[tuple[str, Any]] = ()
    ) -> None:
        """The enabled servers just read, with their stored lists.  A list a session gave
        in this process is newer than the record's, and stays."""
        self._servers = list(configs)
        for server_id, value in stored:
            if server_id not in self._live:
                self._lists[server_id] = stored_tools(value)
        self._recount()

    def listed(self, server_id: str, tools: tuple[Any, ...]) -> None:
        """A session listed its server's tools (on the loop): counted at once, and written
        to the server's record when they changed or their time wants confirming."""
        known = tuple(KnownTool.of(tool) for tool in tools)
        changed = self._lists.get(server_id) != known
        self._lists[server_id] = known
        self._live.add(server_id)
        if changed:
            self._recount()
        now = time.monotonic()
        last = self._written.get(server_id)
        if changed or last is None or now - last >= CONFIRM_AFTER:
            self._written[server_id] = now
            task = asyncio.ensure_future(self._write(server_id))
            self._writing.add(task)
            task.add_done_callback(self._writing.discard)

    async def _write(self, server_id: str) -> None:
        # One write at a time, of the newest list: two listings in quick succession cannot
        # leave the older one stored.
        async with self._write_lock:
            tools = [tool.to_json() for tool in self._lists.get(server_id, ())]
            try:
                await work(self._db, save_known_tools, server_id, tools, utcnow())
            except Exception:  # the next listing writes again
                self._written.pop(server_id, None)
                log.exception("storing the tools of MCP server %s failed", server_id)

    async def aclose(self) -> None:
        """Waits for the writes on their way (closing the app)."""
        if self._writing:
            await asyncio.gather(*self._writing, return_exceptions=True)

    def _recount(self) -> None:
        self._schemas, _ = offered([(c, self._lists.get(c.id, ())) for c in self._servers])
