"""A real MCP server (MCP SDK, streamable HTTP on loopback) for the turn tests (TURN-4).

Run as a subprocess so it outlives a killed ``chatmem serve``::

    python -m tests.support.mcp_server --port 0 --token secret

It prints ``READY <port>`` once listening.  Tools:

- ``echo(text)`` — returns the text;
- ``add(a, b)`` — returns the sum;
- ``slow(seconds, label)`` — sleeps, then returns; for mid-tool-call kill tests;
- ``tiny_image()`` — text, a small PNG as MCP ImageContent, text (like the reference
  server-everything's ``get-tiny-image``, PROV-4);
- ``report_pdf()`` — an embedded resource with a base64 ``blob`` (a binary file);
- ``huge_text(kilobytes)`` — that many KB of order numbers (a result too large to send).

Every call is counted *when it starts*; ``GET /stats`` (no auth) answers
``{"calls": {"echo": n, …}, "started": [...], "finished": [...]}`` so a test can prove a call
never ran twice.  When ``--token`` is given, MCP requests must carry
``Authorization: Bearer <token>`` (the authenticated client of TURN-4).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import logging
import os
import socket
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

CALLS: Counter[str] = Counter()


def tiny_png(size: int = 40) -> bytes:
    """A real PNG of ``size`` x ``size`` pixels of noise (a fixed seed: the same every run)."""
    import random
    import struct
    import zlib

    rng = random.Random(11)
    rows = b"".join(
        b"\x00" + bytes(rng.randrange(256) for _ in range(size * 3)) for _ in range(size)
    )

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", struct.pack(">IIBBBBB", size, size, 8, 2, 0, 0, 0))
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


TINY_PNG = tiny_png()
TINY_PNG_BASE64 = base64.b64encode(TINY_PNG).decode("ascii")
REPORT_PDF = b"%PDF-1.4\n% a small binary file\n" + bytes(range(256)) * 4
STARTED: list[str] = []
FINISHED: list[str] = []


def build_app(token: str | None) -> Any:
    from mcp.server.mcpserver import MCPServer
    from mcp.server.transport_security import TransportSecuritySettings
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response

    server = MCPServer("chatmem-test-tools")

    @server.tool()
    def echo(text: str) -> str:
        """Return the text unchanged."""
        CALLS["echo"] += 1
        return text

    @server.tool()
    def add(a: int, b: int) -> str:
        """Add two integers."""
        CALLS["add"] += 1
        return str(a + b)

    @server.tool()
    def repeat(text: str, times: int) -> str:
        """Return the text repeated (a large result from a small call)."""
        CALLS["repeat"] += 1
        return text * times

    @server.tool()
    def tiny_image() -> list[Any]:
        """Return a tiny PNG image, between two texts."""
        from mcp.types import ImageContent, TextContent

        CALLS["tiny_image"] += 1
        return [
            TextContent(type="text", text="This is a tiny image:"),
            ImageContent(type="image", data=TINY_PNG_BASE64, mime_type="image/png"),
            TextContent(type="text", text="The image above is the MCP tiny image."),
        ]

    @server.tool()
    def report_pdf() -> list[Any]:
        """Return a quarterly report as an embedded binary resource."""
        from mcp.types import BlobResourceContents, EmbeddedResource

        CALLS["report_pdf"] += 1
        blob = base64.b64encode(REPORT_PDF).decode("ascii")
        resource = BlobResourceContents(
            uri="file:///reports/q3.pdf", mime_type="application/pdf", blob=blob
        )
        return [EmbeddedResource(type="resource", resource=resource)]

    @server.tool()
    def huge_text(kilobytes: int) -> str:
        """Return that many kilobytes of order numbers."""
        CALLS["huge_text"] += 1
        line = "order 4711-0815-2026 shipped to warehouse 12, parcel 998877665544\n"
        return (line * (kilobytes * 1024 // len(line) + 1))[: kilobytes * 1024]

    @server.tool()
    async def slow(seconds: float, label: str = "") -> str:
        """Sleep for a while, then answer (used to kill the server mid-call)."""
        CALLS["slow"] += 1
        STARTED.append(label)
        await asyncio.sleep(seconds)
        FINISHED.append(label)
        return f"slept {seconds}s {label}".strip()

    @server.custom_route("/stats", methods=["GET"])
    async def stats(_: Request) -> Response:
        return JSONResponse({"calls": dict(CALLS), "started": STARTED, "finished": FINISHED})

    app = server.streamable_http_app(
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )
    if token is None:
        return app

    async def guarded(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"].startswith("/mcp"):
            headers = dict(scope.get("headers") or [])
            if headers.get(b"authorization") != f"Bearer {token}".encode():
                await JSONResponse({"error": "unauthorized"}, status_code=401)(scope, receive, send)
                return
        await app(scope, receive, send)

    return guarded


def main() -> None:
    import uvicorn

    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--token", default=None)
    args = parser.parse_args()
    sock = socket.socket()
    sock.bind(("127.0.0.1", args.port))
    port = sock.getsockname()[1]
    app = build_app(args.token)
    # The SDK logs every session at INFO on stderr (which tests and benchmarks inherit).
    logging.getLogger("mcp").setLevel(logging.WARNING)
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    server = uvicorn.Server(config)

    async def serve() -> None:
        task = asyncio.create_task(server.serve(sockets=[sock]))
        while not server.started:
            await asyncio.sleep(0.02)
        print(f"READY {port}", flush=True)
        await task

    asyncio.run(serve())


@dataclass
class McpServerProcess:
    """A running test MCP server subprocess."""

    process: subprocess.Popen[str]
    port: int
    token: str | None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def stats(self) -> dict[str, Any]:
        return httpx.get(f"http://127.0.0.1:{self.port}/stats", timeout=5).json()

    def stop(self) -> None:
        # Imported here: the server side of this module runs as its own light process.
        from tests.support.serve import stop_process

        stop_process(self.process, timeout=5)


def wait_until_ready(
    get: Callable[[str], Any], server_id: str, timeout: float = 15.0
) -> dict[str, Any]:
    """Waits until chatmem's session to a registered server is up (PROV-3: its health says
    ``ready``); ``get(path)`` is an administrator's GET.  A turn started before may not be
    offered the server's tools yet: chatmem waits a quarter of a second for a new server."""
    deadline = time.monotonic() + timeout
    while True:
        server = get(f"/api/v1/mcp-servers/{server_id}").json()
        if server["health"]["state"] == "ready":
            return dict(server)
        if time.monotonic() > deadline:
            raise AssertionError(f"MCP server not ready: {server['health']}")
        time.sleep(0.02)


@contextlib.contextmanager
def running_mcp_server(token: str | None = "mcp-secret") -> Iterator[McpServerProcess]:
    root = Path(__file__).resolve().parents[2]
    cmd = [sys.executable, "-m", "tests.support.mcp_server", "--port", "0"]
    if token:
        cmd += ["--token", token]
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHATMEM_")}
    proc = subprocess.Popen(cmd, cwd=root, stdout=subprocess.PIPE, text=True, env=env)
    assert proc.stdout is not None
    deadline = time.monotonic() + 30
    port = 0
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if line.startswith("READY "):
            port = int(line.split()[1])
            break
        if not line and proc.poll() is not None:
            break
    if not port:
        proc.kill()
        raise RuntimeError("test MCP server did not start")
    server = McpServerProcess(proc, port, token)
    try:
        yield server
    finally:
        server.stop()
        proc.stdout.close()


if __name__ == "__main__":
    main()
