"""The fake model server and the test MCP server, each in its own process, with a route a test
awaits instead of polling the server with sleeps in between (the TURN-3 kill tests).

- the fake model server (:mod:`tests.support.model_server`), plus
  ``GET /_control/wait?requests=N&timeout=S``: answers ``{"requests": n}`` once it has
  received ``N`` requests (200), or when ``S`` seconds went by without (504);
- the test MCP server (:mod:`tests.support.mcp_server`), plus
  ``GET /wait?started=LABEL&timeout=S`` (or ``finished=LABEL``): answers its ``/stats`` once a
  ``slow`` call with that label has started (finished), 504 after ``S`` seconds without.

Each answers the moment its condition holds: the server wakes the waiting request itself.
``python -m tests.support.awaited_servers model|mcp --port 0 [--token T]`` prints
``READY …`` like the plain servers.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
from tests.support.mcp_server import McpServerProcess
from tests.support.model_server import FakeModelServer, RecordedRequest, RemoteModelServer
from tests.support.serve import ready_process

ROOT = Path(__file__).resolve().parents[2]


# --- the model server -------------------------------------------------------------------------


class _AwaitedModelServer(FakeModelServer):
    """The fake model server; its request log wakes the requests waiting on it."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        super().__init__(host, port)
        self._arrived = threading.Condition(self._lock)
        server = self
        plain: Any = self._httpd.RequestHandlerClass

        class Handler(plain):
            def do_GET(self) -> None:
                url = urlsplit(self.path)
                if url.path != "/_control/wait":
                    super().do_GET()
                    return
                query = parse_qs(url.query)
                count = int(query["requests"][0])
                timeout = float(query.get("timeout", ["30"])[0])
                with server._arrived:
                    arrived = server._arrived.wait_for(
                        lambda: len(server._requests) >= count, timeout
                    )
                    received = len(server._requests)
                self._send_json(200 if arrived else 504, {"requests": received})

        self._httpd.RequestHandlerClass = Handler

    def _record(self, request: RecordedRequest) -> None:
        with self._arrived:
            self._requests.append(request)
            self._arrived.notify_all()


@dataclass
class AwaitedModelServer(RemoteModelServer):
    """Scripts the model server in its process, and waits on what it received."""

    def wait_for_requests(self, count: int, timeout: float = 15.0) -> int:
        """Returns once the server has received ``count`` requests in all (fails after
        ``timeout`` seconds); the number received."""
        response = httpx.get(
            f"{self._root}/_control/wait",
            params={"requests": count, "timeout": timeout},
            timeout=timeout + 10,
        )
        assert response.status_code == 200, (
            f"the model server received {response.json()['requests']} requests, "
            f"not {count}, within {timeout} s"
        )
        return int(response.json()["requests"])


@contextlib.contextmanager
def awaited_model_server() -> Iterator[AwaitedModelServer]:
    """Like :func:`tests.support.serve.model_server_process`, with the wait route."""
    with ready_process("tests.support.awaited_servers", "model", "--port", "0") as url:
        yield AwaitedModelServer(url)


def _serve_model(port: int) -> None:
    server = _AwaitedModelServer(port=port)
    print(f"READY {server.base_url}", flush=True)
    try:
        server._httpd.serve_forever()
    finally:
        server._httpd.server_close()


# --- the MCP server ---------------------------------------------------------------------------


class _Noticed(list[str]):
    """The MCP server's list of started (finished) ``slow`` calls; an append wakes the
    requests waiting for a label (everything here runs on the server's event loop)."""

    def __init__(self) -> None:
        super().__init__()
        self._changed = asyncio.Event()

    def append(self, label: str) -> None:
        super().append(label)
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    async def until(self, label: str) -> None:
        while label not in self:
            await self._changed.wait()


def _mcp_app(token: str | None) -> Any:
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from tests.support import mcp_server

    started, finished = _Noticed(), _Noticed()
    # The tools and /stats read these module globals when they run.
    mcp_server.STARTED, mcp_server.FINISHED = started, finished
    inner = mcp_server.build_app(token)

    async def app(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["path"] != "/wait":
            await inner(scope, receive, send)
            return
        query = Request(scope, receive).query_params
        seen, label = (
            (started, query["started"]) if "started" in query else (finished, query["finished"])
        )
        status = 200
        try:
            await asyncio.wait_for(seen.until(label), float(query.get("timeout", "30")))
        except TimeoutError:
            status = 504
        stats = {"calls": dict(mcp_server.CALLS), "started": started, "finished": finished}
        await JSONResponse(stats, status_code=status)(scope, receive, send)

    return app


@dataclass
class AwaitedMcpServer(McpServerProcess):
    def wait(
        self, *, started: str | None = None, finished: str | None = None, timeout: float = 15.0
    ) -> dict[str, Any]:
        """Returns the server's stats once the ``slow`` call ``started`` (``finished``) has
        started (finished); fails after ``timeout`` seconds."""
        which = {"started": started} if started is not None else {"finished": finished}
        response = httpx.get(
            f"http://127.0.0.1:{self.port}/wait",
            params={**which, "timeout": timeout},
            timeout=timeout + 10,
        )
        assert response.status_code == 200, f"no slow call {which} within {timeout} s"
        return dict(response.json())


@contextlib.contextmanager
def awaited_mcp_server(token: str | None = "mcp-secret") -> Iterator[AwaitedMcpServer]:
    """Like :func:`tests.support.mcp_server.running_mcp_server`, with the wait route."""
    cmd = [sys.executable, "-m", "tests.support.awaited_servers", "mcp", "--port", "0"]
    if token:
        cmd += ["--token", token]
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHATMEM_")}
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, text=True, env=env)
    assert proc.stdout is not None
    port = 0
    for line in proc.stdout:  # until READY, or the process has ended
        if line.startswith("READY "):
            port = int(line.split()[1])
            break
    if not port:
        proc.kill()
        raise RuntimeError("test MCP server did not start")
    server = AwaitedMcpServer(proc, port, token)
    try:
        yield server
    finally:
        server.stop()
        proc.stdout.close()


def _serve_mcp(port: int, token: str | None) -> None:
    import logging

    import uvicorn

    sock = socket.socket()
    sock.bind(("127.0.0.1", port))
    app = _mcp_app(token)
    logging.getLogger("mcp").setLevel(logging.WARNING)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    # uvicorn's own startup hook says when it listens, instead of polling server.started.
    startup = server.startup

    async def started(sockets: Any = None) -> None:
        await startup(sockets=sockets)
        if not server.should_exit:
            print(f"READY {sock.getsockname()[1]}", flush=True)

    server.startup = started  # type: ignore[method-assign]
    asyncio.run(server.serve(sockets=[sock]))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("which", choices=["model", "mcp"])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--token", default=None)
    args = parser.parse_args()
    if args.which == "model":
        _serve_model(args.port)
    else:
        _serve_mcp(args.port, args.token)


if __name__ == "__main__":
    main()
