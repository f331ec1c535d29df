"""``python -m tests.support.offline serve …``: ``chatmem`` with no way off this machine.

The fuzzer creates model profiles and MCP servers with whatever URLs it likes, and the server
then tries to reach them (a connection test, a turn, a tool listing in the background).  Test
traffic must stay on loopback, so this wrapper makes every name resolve to nothing and every
connection to a non-loopback address fail, before the server starts:

* ``socket.getaddrinfo`` answers only loopback literals and ``localhost``;
* ``socket.socket.connect`` / ``connect_ex`` refuse any IP address that is not loopback;
* ``uvloop`` is hidden, so asyncio's own loop runs and every async connection (httpx, anyio,
  the MCP SDK, redis) goes through the patched Python socket calls.

PostgreSQL's libpq connects from C, but only to the configured database on loopback.
"""

from __future__ import annotations

import ipaddress
import socket
import sys
from typing import Any

_getaddrinfo = socket.getaddrinfo
_connect = socket.socket.connect
_connect_ex = socket.socket.connect_ex


def is_loopback(host: Any) -> bool:
    if isinstance(host, bytes):
        host = host.decode("ascii", "replace")
    if not isinstance(host, str):
        return False
    host = host.strip("[]").split("%", 1)[0]
    if host.lower() in ("localhost", "localhost.", "ip6-localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _guarded_getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
    if host is None or is_loopback(host):
        return _getaddrinfo(host, *args, **kwargs)
    raise socket.gaierror(socket.EAI_NONAME, f"offline test server: {host!r} is not loopback")


def _allowed(sock: socket.socket, address: Any) -> bool:
    if sock.family not in (socket.AF_INET, socket.AF_INET6):
        return True  # Unix sockets stay on this machine
    return isinstance(address, tuple) and is_loopback(address[0])


def _guarded_connect(self: socket.socket, address: Any) -> None:
    if not _allowed(self, address):
        raise ConnectionRefusedError(f"offline test server: {address!r} is not loopback")
    _connect(self, address)


def _guarded_connect_ex(self: socket.socket, address: Any) -> int:
    if not _allowed(self, address):
        return 111  # ECONNREFUSED
    return _connect_ex(self, address)


def install() -> None:
    socket.getaddrinfo = _guarded_getaddrinfo  # type: ignore[assignment]
    socket.socket.connect = _guarded_connect  # type: ignore[method-assign]
    socket.socket.connect_ex = _guarded_connect_ex  # type: ignore[method-assign]
    sys.modules["uvloop"] = None  # type: ignore[assignment]


if __name__ == "__main__":
    install()
    from chatmem.cli import main

    main(sys.argv[1:])
