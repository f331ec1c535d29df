"""The host side of MCP Apps on chatmem's server (APPS-1 … APPS-4).

Theory of operation
-------------------
The browser never talks to an MCP server: the server may be internal and hold credentials.
Everything an app shows or asks goes through :class:`AppHost`, on the same long-lived links
the turns use (:class:`~chatmem.tools.mcp_links.McpPool`, the pinned network backend: the
endpoint policy, PROF-4, applies to every byte).

Showing an app (:meth:`AppHost.show`).  A recorded tool call whose tool has an app is shown
to the owner of its conversation only (anyone else: ``not_found``), from what was stored —
the call's arguments and its whole result — so reopening a conversation never calls the tool
again.  The HTML comes from the cache (``app_resources``) when it was fetched for the
server's current version, else it is read from the server now and kept.  A server that is
down (or removed) costs the chat nothing: the cached HTML of any version is given with
``available`` false and a note, or no HTML at all, and the feed shows the stored text result.
An app larger than :data:`~chatmem.tools.apps.MAX_HTML_BYTES` is never shown (remembered as
such for that version, not fetched again).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any

import anyio

from chatmem.errors import NotFound
from chatmem.security.secret_box import SecretBox
from chatmem.settings import Settings
from chatmem.store import apps as store
from chatmem.store.apps import AppCall, AppResourceRecord
from chatmem.store.db import Database
from chatmem.store.units import read, work
from chatmem.tools.apps import NO_UI, TOO_LARGE, AppDocument, ResourceUi, app_document
from chatmem.tools.mcp_links import MAX_MESSAGE_BYTES, McpPool, ServerLink, describe
from chatmem.tools.toolbox import McpServerConfig, server_config

log = logging.getLogger(__name__)

UNREACHABLE = "the MCP server is unreachable: showing the stored result"
#: Seconds a read of an app's HTML may take at most (a server's call timeout may be longer).
READ_TIMEOUT = 30.0


@dataclass(frozen=True, slots=True)
class AppView:
    """What the feed is given to render one call's app (``web.views.apps.app_public``)."""

    call: AppCall
    html: str | None
    ui: ResourceUi
    available: bool
    note: str | None

    @property
    def arguments(self) -> dict[str, Any]:
        try:
            value = json.loads(self.call.arguments or "{}")
        except ValueError:
            return {}
        return value if isinstance(value, dict) else {}


class AppHost:
    """The apps of the app (``app.state.turns.apps``): see the module docstring."""

    def __init__(self, db: Database, settings: Settings, secrets: SecretBox, pool: McpPool):
        self._db = db
        self._settings = settings
        self._secrets = secrets
        self._pool = pool

    async def call_of(self, user_id: str, tool_call_id: str) -> AppCall:
        """The owner's call that has an app its server shows (else ``not_found``)."""
        call = await read(self._db, store.owned_call, user_id, tool_call_id)
        if call.app_uri is None or not call.show_apps or call.server_id is None:
            raise NotFound("app")
        return call

    async def _config(self, call: AppCall) -> McpServerConfig | None:
        if call.server_id is None or not call.server_enabled:
            return None
        return await read(self._db, server_config, self._settings, self._secrets, call.server_id)

    async def show(self, user_id: str, tool_call_id: str) -> AppView:
        """The call's app, as the module docstring says."""
        call = await self.call_of(user_id, tool_call_id)
        assert call.app_uri is not None and call.server_id is not None
        cached = await read(self._db, store.cached_resource, call.server_id, call.app_uri)
        config = await self._config(call)
        link = await self._pool.ready_link(config) if config is not None else None
        if link is None or not link.ready:
            return _stored(call, cached, UNREACHABLE)
        if cached is not None and cached.server_version == link.server_version:
            return _from_cache(call, cached, available=cached.html is not None)
        try:
            document = await self._fetch(link, call.app_uri)
        except Exception as exc:  # the server went away, timed out, refused the read …
            log.info(
                "MCP server %s: reading %s failed: %s",
                call.server_name,
                call.app_uri,
                describe(exc),
            )
            return _stored(call, cached, UNREACHABLE)
        await work(
            self._db,
            store.keep_resource,
            call.server_id,
            call.app_uri,
            server_version=link.server_version,
            html=document.html,
            ui=document.ui.to_json(),
            size=document.size,
            problem=document.problem,
        )
        return _document_view(call, document)

    async def _fetch(self, link: ServerLink, uri: str) -> AppDocument:
        try:
            with anyio.fail_after(min(READ_TIMEOUT, link.config.call_timeout)):
                result = await link.read_resource(uri)
        except Exception as exc:
            if "byte limit" not in str(exc):  # the SDK's refusal of a too large message
                raise
            return AppDocument(None, NO_UI, MAX_MESSAGE_BYTES, TOO_LARGE)
        return app_document(result, uri)


def _document_view(call: AppCall, document: AppDocument) -> AppView:
    if document.html is None:
        return AppView(
            call, None, document.ui, False, f"{document.problem}: showing the stored result"
        )
    return AppView(call, document.html, document.ui, True, None)


def _from_cache(call: AppCall, cached: AppResourceRecord, *, available: bool) -> AppView:
    ui = ResourceUi.parse(cached.ui)
    if cached.html is None:
        return AppView(call, None, ui, False, f"{cached.problem}: showing the stored result")
    return AppView(call, cached.html, ui, available, None if available else UNREACHABLE)


def _stored(call: AppCall, cached: AppResourceRecord | None, note: str) -> AppView:
    """The server is not there: the HTML fetched last (any version), never live."""
    if cached is None or cached.html is None:
        return AppView(call, None, ResourceUi.parse(cached.ui) if cached else NO_UI, False, note)
    return AppView(call, cached.html, ResourceUi.parse(cached.ui), False, note)
