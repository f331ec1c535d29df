"""MCP server links: one long-lived session per server, owned by one task (PROV-3).

Theory of operation
-------------------
Each enabled MCP server has a :class:`ServerLink` for the life of the app; the turn service
keeps them in an :class:`McpPool`.  A link is one asyncio task that owns everything of its
session — the HTTP client, the SDK ``Client`` with its task group, and a task group of its
own for the calls — so no cancel scope is ever entered in one task and left in another::

    connect and list the tools (deadline: the connect timeout)
      → serve calls; list the tools again every ``refresh`` seconds, or at once after a
        call failed in a way that may mean the server is gone, or when the server says its
        list changed (``notifications/tools/list_changed``)
      → any failure: record it, fail what waits, back off (1 s doubling to a minute),
        connect again.

Callers never touch the session.  A turn asks the pool for the tools that are ready *now*
(:meth:`McpPool.toolbox`: the cached lists of the ready links; a link still on its very
first connection is waited for at most ``first_wait`` seconds after it was created, so a
hung server costs one turn that much, once).  A call is a request put on the link's memory
channel with a future for its answer.  It has a deadline (the server's call timeout), and a
caller that goes away (Stop) cancels just that call's scope inside the link and returns at
once: nothing a tool server does can hold a turn.  The turn's :class:`McpToolBox` routes
each call to the link of the server that owns the tool; a server that cannot be reached, or
hangs, is simply not offered: one broken server does not break every chat.

Connections obey the endpoint policy (PROF-4): the SDK's HTTP client is
:func:`~chatmem.security.network.pinned_mcp_client`, the same pinned network backend the
model client uses; redirects are not followed.

Health.  Each link keeps its state, its last error (with the time), its last success and the
number of tools it lists, for the administrators (``GET /api/v1/mcp-servers``).  Every
listing is also handed to ``on_listed`` (the turn service keeps it with the server's record:
plans count the tools before any turn, seed 003).  The log
names a server only when it fails (once per distinct reason) and when it recovers; a healthy
server is never mentioned.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

import anyio
import anyio.lowlevel
import anyio.to_thread
from mcp import Client
from mcp.client import advertise
from mcp.client.streamable_http import streamable_http_client
from mcp.types import ToolListChangedNotification

from chatmem.security.endpoints import EndpointPolicy
from chatmem.security.network import pinned_mcp_client
from chatmem.store.types import iso, utcnow
from chatmem.tools.apps import APP_MIME_TYPE, EXTENSION_ID
from chatmem.tools.results import tool_content, whole_result
from chatmem.tools.toolbox import (
    KnownTool,
    McpServerConfig,
    ToolBox,
    ToolOutcome,
    ToolRoute,
    offered,
)

log = logging.getLogger(__name__)

LinkState = Literal["connecting", "ready", "failed"]

#: Seconds between two connection attempts after a failure: doubles from the first to the last.
BACKOFF_FIRST = 1.0
BACKOFF_MAX = 60.0
#: Pages of ``tools/list`` read at most (a server that pages forever cannot hang a link).
LIST_PAGES = 50
#: Seconds a closing link may take to say goodbye to its server before it is abandoned.
CLOSE_WAIT = 2.0
#: The largest message a server may send (bytes of one server-sent event; the SDK's default
#: is 1 MB): an app's HTML up to its 2 MB bound, JSON-escaped (APPS-1), and tool results
#: well past the answer bound, which then cuts them (PROV-5).  Past it the request fails.
MAX_MESSAGE_BYTES = 8 * 1024 * 1024


class ServerUnavailable(Exception):
    """The server is not connected (or went away during the call); the tool was not run."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class CallLost(Exception):
    """The session ended while the call was on its way: its result is unknown."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class CallTimedOut(Exception):
    """The call had no answer within the server's call timeout: its result is unknown."""

    def __init__(self, seconds: float) -> None:
        super().__init__(f"no answer within {seconds:g} s")
        self.seconds = seconds


@dataclass
class Health:
    """What an administrator sees of one server (PROV-3)."""

    state: LinkState = "connecting"
    last_error: str | None = None
    last_error_at: datetime | None = None
    last_success_at: datetime | None = None
    tool_count: int | None = None

    def public(self) -> dict[str, Any]:
        return {
            "state": self.state,
            "last_error": self.last_error,
            "last_error_at": iso(self.last_error_at),
            "last_success_at": iso(self.last_success_at),
            "tool_count": self.tool_count,
        }


#: What a request does with the session (``client.call_tool(…)``, ``client.read_resource(…)``).
Operation = Callable[[Any], Awaitable[Any]]


@dataclass
class _Call:
    """One request handed to a link — a tool call, or a resource read (an app's HTML,
    APPS-1): ``what`` names it for the log; the caller awaits ``future``."""

    what: str
    operation: Operation
    future: asyncio.Future[Any]
    scope: anyio.CancelScope | None = None
    abandoned: bool = False

    def abandon(self) -> None:
        """The caller went away (Stop): end the call inside the link, without waiting."""
        self.abandoned = True
        if self.scope is not None:
            self.scope.cancel()

    def answer(self, result: Any = None, error: BaseException | None = None) -> None:
        if self.future.done():
            return
        if error is not None:
            self.future.set_exception(error)
        else:
            self.future.set_result(result)


def describe(exc: BaseException) -> str:
    """A short reason for the log and the health view (never headers: they hold secrets)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, TimeoutError):
        return str(exc) or "timed out"
    text = str(exc).strip() or type(exc).__name__
    message = getattr(exc, "message", None)
    if isinstance(message, str) and message:
        text = message
    return f"{type(exc).__name__}: {text}"[:300]


HttpFactory = Callable[[EndpointPolicy, Any], Any]
#: Told each list a server gives: (the server's id, its tools as the SDK lists them).
OnListed = Callable[[str, tuple[Any, ...]], None]


class ServerLink:
    """One MCP server's session, owned by one task (see the module docstring)."""

    def __init__(
        self,
        config: McpServerConfig,
        policy: EndpointPolicy,
        *,
        refresh: float = 60.0,
        http_factory: HttpFactory = pinned_mcp_client,
        on_listed: OnListed | None = None,
    ) -> None:
        #: Replaced in place when only the policy changes (allow-list, ask first, call timeout).
        self.config = config
        self.health = Health()
        self.tools: tuple[Any, ...] = ()
        #: The version the server gave when the session began (APPS-1: an app's HTML is
        #: cached per server, URI and version); None: never connected, or it gave none.
        self.server_version: str | None = None
        #: Set once the first connection attempt ended, whichever way.
        self.settled = asyncio.Event()
        self.created = time.monotonic()
        self._policy = policy
        self._refresh = refresh
        self._http_factory = http_factory
        self._on_listed = on_listed
        self._send, self._receive = anyio.create_memory_object_stream[_Call](max_buffer_size=1024)
        self._probe = asyncio.Event()
        self._scope = anyio.CancelScope()
        self._task: asyncio.Task[None] | None = None
        self._logged: str | None = None  # the failure last logged, so it is logged once
        self._closing = False
        self._http_status: int | None = None  # the last HTTP error status of this attempt

    @property
    def ready(self) -> bool:
        return self.health.state == "ready" and not self._closing

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name=f"chatmem-mcp-{self.config.name}")

    async def aclose(self) -> None:
        """Ends the session; waits at most :data:`CLOSE_WAIT` for a server that hangs."""
        self._closing = True
        self._scope.cancel()
        self._send.close()
        task = self._task
        if task is None or task.done():
            return
        await asyncio.wait({task}, timeout=CLOSE_WAIT)
        if not task.done():
            task.cancel()

    # -- the caller's side ----------------------------------------------------------------
    async def call(self, tool: str, arguments: dict[str, Any]) -> Any:
        """The tool's result (the SDK's ``CallToolResult``).  Raises
        :class:`ServerUnavailable` or :class:`CallTimedOut`; a cancelled caller cancels the
        call inside the link and leaves at once."""
        return await self._request(f"tool {tool}", lambda client: client.call_tool(tool, arguments))

    async def read_resource(self, uri: str) -> Any:
        """The resource (the SDK's ``ReadResourceResult``), read now (APPS-1: chatmem keeps
        its own cache of an app's HTML); raises as :meth:`call`."""
        return await self._request(
            f"resource {uri}", lambda client: client.read_resource(uri, cache_mode="bypass")
        )

    async def _request(self, what: str, operation: Operation) -> Any:
        if self._closing:
            raise ServerUnavailable("the server's session was closed")
        if not self.ready:
            raise ServerUnavailable(self.health.last_error or "not connected yet")
        call = _Call(what, operation, asyncio.get_running_loop().create_future())
        try:
            self._send.send_nowait(call)
        except anyio.WouldBlock:
            raise ServerUnavailable("too many calls waiting") from None
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            raise ServerUnavailable("the server's session was closed") from None
        try:
            return await call.future
        except asyncio.CancelledError:
            call.abandon()
            raise

    # -- the link's task ------------------------------------------------------------------
    async def _run(self) -> None:
        try:
            await self._connect_and_serve()
        finally:
            # Closed (the server was removed or changed, or the app stops): what still
            # waits on the channel gets its answer, so no caller waits for ever.
            while True:
                try:
                    call = self._receive.receive_nowait()
                except (anyio.WouldBlock, anyio.EndOfStream, anyio.ClosedResourceError):
                    break
                call.answer(error=ServerUnavailable("the server's session was closed"))

    async def _connect_and_serve(self) -> None:
        delay = BACKOFF_FIRST
        with self._scope:
            while True:
                try:
                    await self._session()
                    reason = "the server ended the session"
                except Exception as exc:
                    reason = describe(exc)
                    if self._http_status is not None:  # the SDK's errors do not say it
                        reason = f"{reason} (HTTP {self._http_status})"
                if self._closing:
                    return  # what a session says while it is being closed is not news
                if self.health.last_success_at is not None and self.health.state == "ready":
                    delay = BACKOFF_FIRST  # it worked for a while: try again soon
                self._failed(reason)
                # Calls that arrive while the server is away fail at once.
                with anyio.move_on_after(delay):
                    async for call in self._receive:
                        call.answer(error=ServerUnavailable(reason))
                    return  # the channel was closed: the link is closing
                delay = min(delay * 2, BACKOFF_MAX)

    async def _session(self) -> None:
        config = self.config
        self._policy.check_syntax(config.url)
        # Built in a worker thread: the first one loads the CA bundle (tens of milliseconds
        # the event loop, and every turn on it, would otherwise wait).
        http = await anyio.to_thread.run_sync(self._http_factory, self._policy, config.headers)
        self._http_status = None
        http.event_hooks["response"].append(self._saw_response)
        # One scope around the whole session, entered and left in this task: its deadline is
        # the connect timeout until the tools are listed, then lifted.
        with anyio.CancelScope(deadline=anyio.current_time() + config.connect_timeout) as limit:
            async with (
                http,
                Client(
                    streamable_http_client(
                        config.url, http_client=http, max_sse_event_size=MAX_MESSAGE_BYTES
                    ),
                    mode="legacy",
                    message_handler=self._notified,
                    # APPS-1: chatmem renders MCP Apps (servers may send their UI only then).
                    extensions=[advertise(EXTENSION_ID, {"mimeTypes": [APP_MIME_TYPE]})],
                ) as client,
            ):
                info = client.server_info
                self.server_version = str(info.version) if info and info.version else None
                self._listed(await _list_tools(client))
                limit.deadline = math.inf
                self._http_status = None  # from now on, a status says why the session ended
                async with anyio.create_task_group() as calls:
                    calls.start_soon(self._keep_listing, client)
                    async for call in self._receive:
                        calls.start_soon(self._serve, client, call)
                    calls.cancel_scope.cancel()  # closing: the lister ends too
        if limit.cancelled_caught:
            raise TimeoutError(f"no answer within {config.connect_timeout:g} s (connect timeout)")

    async def _notified(self, message: Any) -> None:
        """The server's notifications: a changed tool list is listed again at once."""
        if isinstance(message, ToolListChangedNotification):
            self._probe.set()
        await anyio.lowlevel.checkpoint()

    async def _saw_response(self, response: Any) -> None:
        if response.status_code >= 400:
            self._http_status = response.status_code

    async def _keep_listing(self, client: Any) -> None:
        """Lists the tools again every ``refresh`` seconds, or when a call failed oddly; a
        listing that fails (or hangs past the connect timeout) ends the session."""
        while True:
            with anyio.move_on_after(self._refresh):
                await self._probe.wait()
            self._probe.clear()
            with anyio.fail_after(self.config.connect_timeout):
                tools = await _list_tools(client)
            self._listed(tools)

    async def _serve(self, client: Any, call: _Call) -> None:
        if call.abandoned or call.future.done():
            return
        timeout = self.config.call_timeout
        call.scope = scope = anyio.CancelScope(deadline=anyio.current_time() + timeout)
        try:
            with scope:
                result = await call.operation(client)
        except anyio.get_cancelled_exc_class():
            # The session is going away under the call: it may have run, or not.
            call.answer(error=CallLost("the session ended during the call"))
            raise
        except Exception as exc:
            call.answer(error=exc)
            self._probe.set()  # is the server still there?  The lister finds out.
            return
        if scope.cancelled_caught:
            call.answer(error=CallTimedOut(timeout))
            if not call.abandoned:
                reason = f"{call.what} had no answer within {timeout:g} s (call timeout)"
                self._error(reason)
                log.warning("MCP server %s: %s", self.config.name, reason)
                self._probe.set()
            return
        self.health.last_success_at = utcnow()
        call.answer(result)

    # -- health ---------------------------------------------------------------------------
    def _listed(self, tools: Sequence[Any]) -> None:
        recovered = self._logged is not None
        self.tools = tuple(tools)
        self.health.state = "ready"
        self.health.tool_count = len(self.tools)
        self.health.last_success_at = utcnow()
        self._logged = None
        self.settled.set()
        if self._on_listed is not None:
            try:
                self._on_listed(self.config.id, self.tools)
            except Exception:  # keeping the list is a courtesy: the session goes on
                log.exception("MCP server %s: keeping its tool list failed", self.config.name)
        if recovered:
            log.info(
                "MCP server %s is reachable again (%d tools)", self.config.name, len(self.tools)
            )

    def _error(self, reason: str) -> None:
        self.health.last_error = reason
        self.health.last_error_at = utcnow()

    def _failed(self, reason: str) -> None:
        self.health.state = "failed"
        self._error(reason)
        self.settled.set()
        if reason != self._logged:
            self._logged = reason
            log.warning("MCP server %s unavailable: %s", self.config.name, reason)


async def _list_tools(client: Any) -> list[Any]:
    tools: list[Any] = []
    cursor: str | None = None
    for _ in range(LIST_PAGES):
        page = await client.list_tools(cursor=cursor, cache_mode="refresh")
        tools.extend(page.tools)
        cursor = page.next_cursor
        if cursor is None:
            break
    return tools


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
        route = self._routes.get(name)
        if route is None:
            return ToolOutcome(f"Unknown tool {name!r}.", is_error=True)
        try:
            args = json.loads(arguments or "{}")
        except ValueError:
            return ToolOutcome("The tool arguments were not valid JSON.", is_error=True)
        if not isinstance(args, dict):
            return ToolOutcome("The tool arguments must be a JSON object.", is_error=True)
        return await call_on(self._links[route.server_id], route.tool, args)


async def call_on(link: ServerLink, tool: str, args: dict[str, Any]) -> ToolOutcome:
    """One call of a server's tool on its link, as an outcome (never an exception): the one
    way chatmem calls a tool, for the model's turns and the apps' calls alike (APPS-3)."""
    server = link.config.name
    try:
        result = await link.call(tool, args)
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
            f"{server!r} ended during the call. It was not repeated automatically.",
            is_error=True,
            unknown=True,
        )
    except ServerUnavailable as exc:
        return ToolOutcome(
            f"The tool was not called: the MCP server {server!r} is unavailable ({exc.reason}).",
            is_error=True,
        )
    except Exception as exc:
        return ToolOutcome(f"The tool failed: {type(exc).__name__}: {exc}"[:2000], is_error=True)
    content = tool_content(result, tool)  # binary parts as attachments (PROV-4)
    return ToolOutcome(
        content.text,
        is_error=bool(getattr(result, "is_error", False)),
        attachments=content.attachments,
        result=whole_result(result),
    )


@dataclass
class McpPool:
    """The links of the enabled MCP servers, for the app's life (the turn service's)."""

    policy: EndpointPolicy
    refresh: float = 60.0
    first_wait: float = 0.2
    http_factory: HttpFactory = pinned_mcp_client
    on_listed: OnListed | None = None
    _links: dict[str, ServerLink] = field(default_factory=dict)
    _closing: set[asyncio.Task[None]] = field(default_factory=set)

    def sync(self, configs: Sequence[McpServerConfig]) -> list[ServerLink]:
        """Links for exactly these servers, in their order: a new server starts connecting, a
        changed URL, header or connect timeout reconnects, a policy change applies at once,
        and a server no longer listed is closed (in the background)."""
        wanted = {config.id for config in configs}
        for server_id in [s for s in self._links if s not in wanted]:
            self._retire(self._links.pop(server_id))
        return [self.link_for(config) for config in configs]

    def link_for(self, config: McpServerConfig) -> ServerLink:
        """The link of one server as configured now (APPS-3: an app's call reads its server
        as a turn does), the others untouched: started when new, reconnected when its URL,
        headers or connect timeout changed, its policy replaced in place otherwise."""
        link = self._links.get(config.id)
        if link is not None and link.config.connection_key != config.connection_key:
            self._retire(self._links.pop(config.id))
            link = None
        if link is None:
            link = ServerLink(
                config,
                self.policy,
                refresh=self.refresh,
                http_factory=self.http_factory,
                on_listed=self.on_listed,
            )
            link.start()
            self._links[config.id] = link
        else:
            link.config = config
        return link

    async def ready_link(self, config: McpServerConfig) -> ServerLink:
        """:meth:`link_for`, waited for like a turn's servers: a link on its very first
        connection at most until ``first_wait`` seconds after it was created."""
        link = self.link_for(config)
        left = link.created + self.first_wait - time.monotonic()
        if not link.settled.is_set() and left > 0:
            with anyio.move_on_after(left):
                await link.settled.wait()
        return link

    async def toolbox(self, configs: Sequence[McpServerConfig]) -> ToolBox:
        """The tools of the servers ready now.  A server on its very first connection is
        waited for until ``first_wait`` seconds after its link was created — never longer,
        and only once."""
        links = self.sync(configs)
        if not links:
            return ToolBox()
        now = time.monotonic()
        waiting = [
            link
            for link in links
            if not link.settled.is_set() and link.created + self.first_wait > now
        ]
        if waiting:
            until = max(link.created for link in waiting) + self.first_wait
            with anyio.move_on_after(until - now):
                for link in waiting:
                    await link.settled.wait()
        return McpToolBox([link for link in links if link.ready])

    def listed(self, server_id: str) -> tuple[KnownTool, ...] | None:
        """The tools the server's session last listed, with their apps (None: no link here,
        or it never listed)."""
        link = self._links.get(server_id)
        if link is None or link.health.tool_count is None:
            return None
        return tuple(KnownTool.of(tool) for tool in link.tools)

    def status(self, server_id: str) -> dict[str, Any] | None:
        """The server's health and the names of the tools it lists (None: no link here)."""
        link = self._links.get(server_id)
        if link is None:
            return None
        return {**link.health.public(), "tools": sorted(tool.name for tool in link.tools)}

    def _retire(self, link: ServerLink) -> None:
        task = asyncio.ensure_future(link.aclose())
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    async def aclose(self) -> None:
        for link in list(self._links.values()):
            self._retire(link)
        self._links.clear()
        if self._closing:
            with contextlib.suppress(Exception):
                await asyncio.gather(*self._closing, return_exceptions=True)
