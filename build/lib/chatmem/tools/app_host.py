"""The host side of MCP Apps on chatmem's server (APPS-1 … APPS-4).

Theory of operation
-------------------
The browser never talks to an MCP server: the server may be internal and hold credentials.
Everything an app shows or asks goes through :class:`AppHost`, on the same long-lived links
the turns use (:class:`~chatmem.tools.mcp_links.McpPool`, the pinned network backend: the
endpoint policy, PROF-4, applies to every byte).  Every request names a recorded tool call
(the app's own), answered for the owner of its conversation only (anyone else:
``not_found``, STORE-1).

Showing an app (:meth:`AppHost.show`).  From what was stored — the call's arguments and its
whole result — so reopening a conversation never calls the tool again.  The HTML comes from
the cache (``app_resources``) when it was fetched for the server's current version, else it
is read from the server now and kept.  A server that is down (or removed) costs the chat
nothing: the cached HTML of any version is given with ``available`` false and a note, or no
HTML at all, and the feed shows the stored text result.  An app larger than
:data:`~chatmem.tools.apps.MAX_HTML_BYTES` is never shown (remembered as such for that
version, not fetched again).

What an app asks (:meth:`AppHost.call_tool`, :meth:`AppHost.read_resource`) goes to its own
server only, under the rules of the model's calls (APPS-3): the server's allow-list and
"ask first" tools (PROV-6) — an "ask first" call is refused with ``approval_required``
until the page has asked the user and sends it again approved — and a tool whose
visibility leaves out apps is refused.  Each tool call is recorded before it is made and
ended like a turn's (``tool_calls``: ``caller`` "app", the user, no run) and made by the
one call path of the model's calls (:func:`~chatmem.tools.mcp_links.call_on`): a server
that is down answers an error result, never an exception.  A conversation's apps may make
at most ``CHATMEM_APP_CALLS_PER_MINUTE`` requests a minute (:class:`CallRate`, per process):
a flooding app is refused with ``rate_limited``, and nothing else notices.
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import anyio
from mcp.shared.exceptions import MCPError

from chatmem.errors import (
    ApprovalRequired,
    Forbidden,
    InvalidInput,
    McpUnavailable,
    NotFound,
    PayloadTooLarge,
    RateLimited,
)
from chatmem.security.secret_box import SecretBox
from chatmem.settings import Settings
from chatmem.store import apps as store
from chatmem.store import tool_calls
from chatmem.store.apps import AppCall, AppResourceRecord
from chatmem.store.conversations import owned_conversation_row
from chatmem.store.db import Database
from chatmem.store.types import new_id
from chatmem.store.units import read, work
from chatmem.tools.apps import (
    NO_UI,
    TOO_LARGE,
    AppDocument,
    ResourceUi,
    app_document,
    app_refusal,
)
from chatmem.tools.known import stored_tools
from chatmem.tools.mcp_links import (
    MAX_MESSAGE_BYTES,
    McpPool,
    ServerLink,
    call_on,
    describe,
)
from chatmem.tools.results import bound_tool_result, kept_result, whole_result
from chatmem.tools.toolbox import KnownTool, McpServerConfig, read_mcp_servers, server_config

log = logging.getLogger(__name__)

UNREACHABLE = "the MCP server is unreachable: showing the stored result"
#: Seconds a read of an app's HTML may take at most (a server's call timeout may be longer).
READ_TIMEOUT = 30.0
#: Conversations the rate remembers at most (the least recently seen are forgotten).
RATE_KEYS = 10_000


class CallRate:
    """At most ``per_minute`` requests per key in any 60 seconds (the times of the last ones,
    per key, in one process); ``clock`` is injectable."""

    def __init__(self, per_minute: int, clock: Callable[[], float] = time.monotonic) -> None:
        self._limit = per_minute
        self._clock = clock
        self._seen: OrderedDict[str, deque[float]] = OrderedDict()

    def take(self, key: str) -> None:
        """Counts one request, or refuses it with :class:`RateLimited` (not counted)."""
        now = self._clock()
        times = self._seen.pop(key, None) or deque()
        while times and times[0] <= now - 60.0:
            times.popleft()
        self._seen[key] = times
        while len(self._seen) > RATE_KEYS:
            self._seen.popitem(last=False)
        if len(times) >= self._limit:
            wait = math.ceil(times[0] + 60.0 - now)
            raise RateLimited(
                f"This conversation's apps made {self._limit} requests in the last minute; "
                f"try again in {wait} s.",
                retry_after=wait,
            )
        times.append(now)


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


@dataclass(frozen=True, slots=True)
class _Server:
    """An app's server as configured now, its link and its tools (live, else as stored)."""

    config: McpServerConfig
    link: ServerLink
    tools: Mapping[str, KnownTool]


class AppHost:
    """The apps of the app (``app.state.turns.apps``): see the module docstring."""

    def __init__(
        self,
        db: Database,
        settings: Settings,
        secrets: SecretBox,
        pool: McpPool,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._db = db
        self._settings = settings
        self._secrets = secrets
        self._pool = pool
        self.rate = CallRate(settings.app_calls_per_minute, clock)

    async def call_of(self, user_id: str, tool_call_id: str) -> AppCall:
        """The owner's call that has an app its server shows (else ``not_found``)."""
        call = await read(self._db, store.owned_call, user_id, tool_call_id)
        if call.app_uri is None or not call.show_apps or call.server_id is None:
            raise NotFound("app")
        return call

    async def _server(self, call: AppCall) -> _Server | None:
        """The call's server when it is enabled (None: removed or disabled)."""
        if call.server_id is None or not call.server_enabled:
            return None
        found = await read(self._db, server_config, self._settings, self._secrets, call.server_id)
        if found is None:
            return None
        config, stored = found
        link = await self._pool.ready_link(config)
        listed = self._pool.listed(config.id)
        tools = listed if listed is not None else stored_tools(stored)
        return _Server(config, link, {tool.name: tool for tool in tools})

    # -- showing ----------------------------------------------------------------------------
    async def show(self, user_id: str, tool_call_id: str) -> AppView:
        """The call's app, as the module docstring says."""
        call = await self.call_of(user_id, tool_call_id)
        assert call.app_uri is not None and call.server_id is not None
        cached = await read(self._db, store.cached_resource, call.server_id, call.app_uri)
        server = await self._server(call)
        if server is None or not server.link.ready:
            return _stored(call, cached, UNREACHABLE)
        link = server.link
        if cached is not None and cached.server_version == link.server_version:
            return _from_cache(call, cached)
        try:
            document = await self._fetch(link, call.app_uri)
        except Exception as exc:  # the server went away, timed out, refused the read …
            reason = describe(exc)
            log.info("MCP server %s: reading %s failed: %s", call.server_name, call.app_uri, reason)
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
        if document.html is None:
            return AppView(call, None, document.ui, False, _note(document.problem))
        return AppView(call, document.html, document.ui, True, None)

    async def _fetch(self, link: ServerLink, uri: str) -> AppDocument:
        try:
            with anyio.fail_after(min(READ_TIMEOUT, link.config.call_timeout)):
                result = await link.read_resource(uri)
        except Exception as exc:
            if "byte limit" not in str(exc):  # the SDK's refusal of a too large message
                raise
            return AppDocument(None, NO_UI, MAX_MESSAGE_BYTES, TOO_LARGE)
        return app_document(result, uri)

    # -- what an app asks -------------------------------------------------------------------
    async def call_tool(
        self,
        user_id: str,
        tool_call_id: str,
        name: str,
        arguments: dict[str, Any],
        *,
        approved: bool = False,
    ) -> dict[str, Any]:
        """APPS-3: ``tools/call`` from the app of ``tool_call_id``; the ``CallToolResult``
        JSON (an error result when the server did not answer)."""
        call = await self.call_of(user_id, tool_call_id)
        self.rate.take(call.conversation_id)
        server = await self._server(call)
        if server is None:
            raise Forbidden("The app's MCP server is not enabled.")
        config, tool = server.config, server.tools.get(name)
        refusal = app_refusal(
            tool.app if tool else None, offered=config.offers(name), known=tool is not None
        )
        if refusal is not None:
            raise Forbidden(refusal)
        ask_first = name in config.ask_first_tools
        if ask_first and not approved:
            raise ApprovalRequired(name)
        _row_id, answer = await self._make(
            call.conversation_id, user_id, server, name, arguments, ask_first=ask_first
        )
        return answer

    async def _make(
        self,
        conversation_id: str,
        user_id: str,
        server: _Server,
        name: str,
        arguments: dict[str, Any],
        *,
        ask_first: bool,
    ) -> tuple[str, dict[str, Any]]:
        """One call made for the user (``caller`` "app"): recorded before it is made (TURN-3)
        and when it ends, as a turn records the model's; its record id and the result an
        app is answered (an error result when the server did not answer)."""
        config, tool = server.config, server.tools.get(name)
        row_id = new_id()
        await work(
            self._db,
            tool_calls.tool_started,
            run_id=None,
            conversation_id=conversation_id,
            call_id=row_id,
            name=name,
            arguments=json.dumps(arguments, ensure_ascii=False),
            message_id=None,
            server_id=config.id,
            server_name=config.name,
            tool=name,
            user_id=user_id,
            row_id=row_id,
            caller="app",
            app_uri=tool.app.resource_uri if tool and tool.app else None,
            decided_by=user_id if ask_first else None,
        )
        began = time.monotonic()
        outcome = await call_on(server.link, name, arguments)
        status = "unknown" if outcome.unknown else "failed" if outcome.is_error else "completed"
        limit = self._settings.max_answer_bytes
        text, _cut = bound_tool_result(outcome.text, limit)
        whole = kept_result(outcome.result, limit)
        duration = round((time.monotonic() - began) * 1000)
        await work(self._db, tool_calls.tool_finished, row_id, status, text, duration, whole)
        if whole is not None:
            return row_id, whole
        if outcome.result is not None:
            text = f"The tool's result is larger than the {limit} bytes this server passes on."
        return row_id, {"content": [{"type": "text", "text": text}], "isError": True}

    # -- the Live Workspace (APPS-4) --------------------------------------------------------
    async def workspaces(self) -> list[dict[str, str]]:
        """The workspace tools one may open: each enabled server's that shows apps and whose
        allow-list offers its workspace tool."""
        configs, _stored = await read(self._db, read_mcp_servers, self._settings, self._secrets)
        return [
            {"server_id": c.id, "server_name": c.name, "tool": c.workspace_tool}
            for c in configs
            if c.show_apps and c.workspace_tool is not None and c.offers(c.workspace_tool)
        ]

    async def open_workspace(
        self, user_id: str, conversation_id: str, server_id: str, *, approved: bool = False
    ) -> str:
        """APPS-4 "Open Live Workspace": calls the server's workspace tool for the user (no
        arguments, no model turn; recorded as the app's call), keeps the call in the
        conversation and opens its app in the workspace; the call's record id.  A server
        without a workspace tool (or one not enabled, or showing no apps) is ``not_found``."""
        await read(self._db, owned_conversation_row, user_id, conversation_id)
        found = await read(self._db, server_config, self._settings, self._secrets, server_id)
        config = found[0] if found is not None else None
        if config is None or not config.show_apps or config.workspace_tool is None:
            raise NotFound("workspace")
        name = config.workspace_tool
        link = await self._pool.ready_link(config)
        listed = self._pool.listed(config.id)
        tools = listed if listed is not None else stored_tools(found[1] if found else None)
        server = _Server(config, link, {tool.name: tool for tool in tools})
        tool = server.tools.get(name)
        if tool is None or tool.app is None:
            raise NotFound("workspace")
        if not config.offers(name):
            raise Forbidden("The administrator does not allow this tool.")
        ask_first = name in config.ask_first_tools
        if ask_first and not approved:
            raise ApprovalRequired(name)
        self.rate.take(conversation_id)
        row_id, _answer = await self._make(
            conversation_id, user_id, server, name, {}, ask_first=ask_first
        )
        await work(self._db, store.set_workspace, conversation_id, row_id)
        return row_id

    async def read_resource(self, user_id: str, tool_call_id: str, uri: str) -> dict[str, Any]:
        """APPS-3: ``resources/read`` from the app of ``tool_call_id``, on its own server;
        the ``ReadResourceResult`` JSON."""
        call = await self.call_of(user_id, tool_call_id)
        self.rate.take(call.conversation_id)
        server = await self._server(call)
        if server is None:
            raise Forbidden("The app's MCP server is not enabled.")
        link = server.link
        try:
            with anyio.fail_after(min(READ_TIMEOUT, link.config.call_timeout)):
                result = await link.read_resource(uri)
        except MCPError as exc:
            if "byte limit" in str(exc):
                raise PayloadTooLarge(
                    "The resource is larger than this server passes on."
                ) from None
            raise InvalidInput(f"The MCP server refused the read: {exc}"[:500]) from None
        except Exception as exc:
            raise McpUnavailable(
                f"The MCP server {link.config.name!r} is unavailable ({describe(exc)})."
            ) from None
        whole = kept_result(whole_result(result), self._settings.max_answer_bytes)
        if whole is None:
            raise PayloadTooLarge("The resource is larger than this server passes on.")
        return whole


def _note(problem: str | None) -> str:
    return f"{problem or 'the app cannot be shown'}: showing the stored result"


def _from_cache(call: AppCall, cached: AppResourceRecord) -> AppView:
    ui = ResourceUi.parse(cached.ui)
    if cached.html is None:
        return AppView(call, None, ui, False, _note(cached.problem))
    return AppView(call, cached.html, ui, True, None)


def _stored(call: AppCall, cached: AppResourceRecord | None, note: str) -> AppView:
    """The server is not there: the HTML fetched last (any version), never live."""
    if cached is None or cached.html is None:
        return AppView(call, None, ResourceUi.parse(cached.ui) if cached else NO_UI, False, note)
    return AppView(call, cached.html, ResourceUi.parse(cached.ui), False, note)
