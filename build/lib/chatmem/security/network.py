"""The one pinned network backend (PROF-4): how chatmem opens a connection to a user's URL.

Every connection to a user-supplied URL — a model API through httpx (:func:`safe_async_client`),
an MCP server through the SDK's httpx2 (:func:`pinned_mcp_client`) — is opened by one
:class:`PinnedNetworkBackend`.  The two HTTP stacks differ only in their httpcore flavour's
module names (``httpcore`` and ``httpcore2``), so the backend wraps that flavour's own backend
and is told which of its errors mean "this address did not answer".

Rules:

* the host name is resolved through the :class:`~chatmem.security.endpoints.EndpointPolicy`
  (refusing what it refuses) and the connection goes to the first *checked* address that
  answers: the OS never resolves a second time, so a name that rebinds between the check and
  the connect cannot slip in;
* TLS still uses the URL's host name (SNI and certificate verification), so pinning the
  address keeps TLS honest;
* unix sockets are refused;
* redirects are never followed and proxy environment variables are ignored
  (``trust_env=False``); the model client also checks every request URL's form
  (:meth:`EndpointPolicy.check_syntax`), not only the saved one.
"""

from __future__ import annotations

import functools
import ssl
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Protocol, cast

import anyio
import anyio.to_thread
import certifi
import httpcore
import httpx

from chatmem.errors import EndpointNotAllowed
from chatmem.security.endpoints import EndpointPolicy, is_ip_literal

if TYPE_CHECKING:
    import httpx2


class _FlavourBackend(Protocol):
    """What the backend needs of an httpcore flavour's own backend (``AnyIOBackend``)."""

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Any = None,
    ) -> Any: ...

    async def sleep(self, seconds: float) -> None: ...


class PinnedNetworkBackend(httpcore.AsyncNetworkBackend):
    """Resolves through the policy and connects ``inner`` to the address that passed the check.

    httpcore calls ``connect_tcp(host, port)`` with the URL's host name; the TLS handshake
    that follows still uses that host name, so pinning the IP here keeps TLS honest while
    making DNS rebinding impossible.  ``inner`` is the flavour's own backend and
    ``connect_errors`` its errors for an address that does not answer (the next is tried).
    """

    def __init__(
        self,
        policy: EndpointPolicy,
        inner: _FlavourBackend | None = None,
        connect_errors: tuple[type[Exception], ...] = (
            httpcore.ConnectError,
            httpcore.ConnectTimeout,
        ),
    ) -> None:
        self._policy = policy
        self._inner: _FlavourBackend = httpcore.AnyIOBackend() if inner is None else inner
        self._connect_errors = connect_errors

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        if is_ip_literal(host.strip("[]")):
            addresses = self._policy.checked_addresses(host, port)  # nothing to resolve
        else:
            addresses = await anyio.to_thread.run_sync(self._policy.checked_addresses, host, port)
        last: Exception | None = None
        for address in addresses:
            try:
                stream: httpcore.AsyncNetworkStream = await self._inner.connect_tcp(
                    address,
                    port,
                    timeout=timeout,
                    local_address=local_address,
                    socket_options=socket_options,
                )
                return stream
            except self._connect_errors as exc:
                last = exc
        assert last is not None
        raise last

    async def connect_unix_socket(
        self, *args: object, **kwargs: object
    ) -> httpcore.AsyncNetworkStream:
        raise EndpointNotAllowed(
            "This endpoint is not allowed: unix sockets.", reason="unix socket"
        )

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


# --- httpx: the model client ------------------------------------------------------------------


class SafeTransport(httpx.AsyncHTTPTransport):
    """An httpx transport that enforces the policy on every request it sends."""

    def __init__(
        self,
        policy: EndpointPolicy,
        *,
        ssl_context: ssl.SSLContext | None = None,
        limits: httpx.Limits = httpx.Limits(max_connections=20, max_keepalive_connections=5),
    ) -> None:
        ctx = ssl_context or ssl.create_default_context(cafile=certifi.where())
        super().__init__(verify=ctx, trust_env=False, limits=limits)
        self._policy = policy
        self._passed: set[str] = set()
        # Same pool httpx would build, with our network backend.  No proxy, ever.
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=ctx,
            max_connections=limits.max_connections,
            max_keepalive_connections=limits.max_keepalive_connections,
            keepalive_expiry=limits.keepalive_expiry,
            network_backend=PinnedNetworkBackend(policy),
        )

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        # The syntactic rules (scheme, user-info, numeric hosts) apply to every request URL,
        # not only the one that was saved; the backend then checks the addresses.  A URL
        # that passed is remembered (the check is pure syntax): a model endpoint is called
        # with the same URL at every step of every turn.
        url = str(request.url)
        if url not in self._passed:
            self._policy.check_syntax(url)
            if len(self._passed) >= 256:
                self._passed.clear()
            self._passed.add(url)
        return await super().handle_async_request(request)


def safe_async_client(
    policy: EndpointPolicy,
    *,
    timeout: httpx.Timeout | float = 30.0,
    headers: Mapping[str, str] | None = None,
    ssl_context: ssl.SSLContext | None = None,
    limits: httpx.Limits | None = None,
) -> httpx.AsyncClient:
    """An ``httpx.AsyncClient`` for user-supplied URLs: policy-checked, pinned, no redirects,
    no proxies from the environment."""
    transport = (
        SafeTransport(policy, ssl_context=ssl_context)
        if limits is None
        else SafeTransport(policy, ssl_context=ssl_context, limits=limits)
    )
    return httpx.AsyncClient(
        transport=transport,
        timeout=timeout,
        headers=dict(headers or {}),
        follow_redirects=False,
        trust_env=False,
    )


# --- httpx2: the MCP SDK ----------------------------------------------------------------------


@functools.cache
def _mcp_ssl_context() -> ssl.SSLContext:
    """One verifying context for every MCP connection: loading the CA bundle takes tens of
    milliseconds, which each (re)connection would otherwise spend on the event loop."""
    import httpx2

    return httpx2.create_ssl_context(trust_env=False)


def pinned_mcp_client(policy: EndpointPolicy, headers: Mapping[str, str]) -> httpx2.AsyncClient:
    """An httpx2 client for the MCP SDK whose connections go to policy-checked addresses
    (httpx2 is imported on first use: only MCP links need it)."""
    import httpcore2
    import httpx2

    backend = PinnedNetworkBackend(
        policy,
        httpcore2.AnyIOBackend(),
        (httpcore2.ConnectError, httpcore2.ConnectTimeout),
    )
    ssl_context = _mcp_ssl_context()
    transport = httpx2.AsyncHTTPTransport(verify=ssl_context, trust_env=False)
    transport._pool = httpcore2.AsyncConnectionPool(  # same pool, our network backend
        ssl_context=ssl_context,
        # The flavours' backend interfaces are the same methods under two module names.
        network_backend=cast("httpcore2.AsyncNetworkBackend", backend),
    )
    return httpx2.AsyncClient(
        transport=transport,
        headers=dict(headers),
        timeout=httpx2.Timeout(30.0, read=300.0),
        follow_redirects=False,
        trust_env=False,
    )
