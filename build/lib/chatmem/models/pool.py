"""The connection pools of the model APIs (PROF-4, PROF-5): one per base URL, no credentials.

Every profile on one base URL shares one policy-checked pool (:func:`http_pool`, over the
pinned network backend of :mod:`chatmem.security.network`): each request carries its own key,
so no key is kept in a pool.  A :class:`SharedHttp` counts the requests in flight, so a pool
that is retired is closed once the last of them ends, never under one; it also remembers what
the server refused (``stream_options``, long tool call ids) for the life of the process.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx

from chatmem.security.endpoints import EndpointPolicy
from chatmem.security.network import safe_async_client


def http_pool(
    policy: EndpointPolicy,
    *,
    timeout: float,
    connect_timeout: float = 10.0,
    ssl: ssl.SSLContext | None = None,
) -> httpx.AsyncClient:
    """A connection pool for model APIs: policy-checked (SSRF), no credentials of its own.
    Every profile on one base URL shares it, so it holds as many streams as a busy server
    runs turns at once (:data:`MODEL_POOL_LIMITS`)."""
    return safe_async_client(
        policy,
        timeout=httpx.Timeout(timeout, connect=connect_timeout),
        ssl_context=ssl,
        limits=MODEL_POOL_LIMITS,
    )


#: Streams open at once to one model API, and idle connections kept for the next turns.  The
#: transport's default (20, 5 kept) made the 21st concurrent turn wait for a connection, and
#: most turns open a new one (``bench/load.py``, 100 streams).
MODEL_POOL_LIMITS = httpx.Limits(max_connections=256, max_keepalive_connections=128)


class SharedHttp:
    """One policy-checked connection pool (``httpx.AsyncClient``), used by the model clients
    of every profile on one base URL: it carries no credentials (each request sends its own
    key).  Counts the requests in flight, so a pool that is retired (evicted from
    :class:`~chatmem.models.clients.ModelClients`, or its client closed) is closed once the
    last of them ends, never under one."""

    def __init__(self, http: httpx.AsyncClient) -> None:
        self.http = http
        #: PROV-1: the server refused ``stream_options``; asked without it from then on.
        self.refuses_stream_options = False
        #: The server takes only 9-character alphanumeric tool call ids (Mistral): the
        #: history's ids are sent in that form from then on (:func:`short_tool_call_ids`).
        self.short_tool_call_ids = False
        self._active = 0
        self._retired = False
        self._closing: asyncio.Task[None] | None = None

    @asynccontextmanager
    async def lease(self) -> AsyncIterator[httpx.AsyncClient]:
        self._active += 1
        try:
            yield self.http
        finally:
            self._active -= 1
            if self._retired and self._active == 0:
                await self.http.aclose()

    async def retire(self) -> None:
        self._retired = True
        if self._active == 0:
            await self.http.aclose()

    def retire_soon(self) -> None:
        """:meth:`retire` from code that cannot await (on the event loop)."""
        if not self._retired:
            self._closing = asyncio.get_running_loop().create_task(self.retire())
