"""A TCP server that accepts connections and never answers (PROV-3's hung MCP server).

It reads and discards what arrives, so the client's request is fully sent and then waits for
an answer that never comes — the behaviour that froze turns in issue 11.  ``accepted`` counts
connections; ``wait_accepted(n)`` blocks until ``n`` were accepted (tests wait on that event,
not on a sleep).
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field


@dataclass
class HungServer:
    port: int
    accepted: int = 0
    _changed: threading.Condition = field(default_factory=threading.Condition)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def wait_accepted(self, count: int = 1, timeout: float = 10.0) -> bool:
        with self._changed:
            return self._changed.wait_for(lambda: self.accepted >= count, timeout)


@contextlib.contextmanager
def hung_server() -> Iterator[HungServer]:
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    server = HungServer(listener.getsockname()[1])
    connections: list[socket.socket] = []
    stop = threading.Event()

    def drain(conn: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while not stop.is_set() and conn.recv(65536):
                pass

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            connections.append(conn)
            with server._changed:
                server.accepted += 1
                server._changed.notify_all()
            threading.Thread(target=drain, args=(conn,), daemon=True).start()

    thread = threading.Thread(target=accept, name="hung-mcp-server", daemon=True)
    thread.start()
    try:
        yield server
    finally:
        stop.set()
        listener.close()
        for conn in connections:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
            conn.close()
        thread.join(timeout=5)
