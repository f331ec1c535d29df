"""A real MCP server with MCP Apps (the SDK's ``Apps`` extension, streamable HTTP on loopback)
for the app tests (APPS-1 … APPS-4), run as a subprocess like :mod:`tests.support.mcp_server`::

    python -m tests.support.mcp_app_server --port 0 [--version 1.0.0] [--label v1]

It prints ``READY <port>`` once listening.  Its tools:

- ``get_weather(city="Lisbon")`` — its app is ``ui://weather/app.html``; the result has text
  content *and* ``structuredContent`` (``{"city", "temperature_c", "reading"}``: ``reading``
  counts the calls, so a test can tell a stored result from a new one);
- ``refresh_weather(city)`` — app-only (``_meta.ui.visibility: ["app"]``): never offered to
  the model, callable by the app;
- ``place_order(item)`` — with the same app, a tool an administrator may mark "ask first";
- ``model_only_lookup(key)`` — ``visibility: ["model"]``: the model's, not the app's;
- ``legacy_clock()`` — declares its app the older way, ``_meta["ui/resourceUri"]``
  (``ui://clock/app.html``);
- ``big_app()`` — its app resource is larger than the 2 MB chatmem takes;
- ``plain_echo(text)`` — no app.

The resource ``ui://weather/app.html`` (``text/html;profile=mcp-app``) declares in its
``_meta.ui`` CSP domains, the permissions ``camera`` and ``clipboardWrite``, and
``prefersBorder: true``.  Its HTML is a small hand-written app that speaks the MCP Apps
JSON-RPC over ``postMessage`` (no library): ``ui/initialize`` then
``ui/notifications/initialized``; it shows the ``tool-input`` and ``tool-result`` it is sent
(``#input``, ``#result``, ``#cancelled``) and has buttons that send ``tools/call``
(``refresh_weather``, and ``place_order``), ``resources/read``, ``ui/message``,
``ui/update-model-context``, ``ui/open-link``, ``ui/request-display-mode`` (fullscreen and
the workspace), ``notifications/message``, and one (``#probe``) that tries
``document.cookie`` and ``fetch('/api/v1/me')`` and shows what it got in ``#probe-result``.
Each answer the host sends back is shown in ``#log`` (one line per message).
``--label`` is written into the page (``#label``) and ``--version`` is the server's version
(chatmem caches an app's HTML per server, URI and version).

``GET /stats`` (no auth) answers ``{"calls": {"get_weather": n, …}, "reads": {uri: n}}``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import socket
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from mcp.types import CallToolResult, TextContent

CALLS: Counter[str] = Counter()
READS: Counter[str] = Counter()

WEATHER_URI = "ui://weather/app.html"
CLOCK_URI = "ui://clock/app.html"
BIG_URI = "ui://big/app.html"
#: What the weather app's resource declares (``_meta.ui.csp``).
CONNECT_DOMAINS = ["https://api.weather.example"]
RESOURCE_DOMAINS = ["https://cdn.weather.example"]
FRAME_DOMAINS = ["https://maps.weather.example"]
BASE_URI_DOMAINS = ["https://weather.example"]

APP_SCRIPT = r"""
(function () {
  var nextId = 1;
  var pending = {};
  function log(text) {
    var line = document.createElement("div");
    line.textContent = text;
    document.getElementById("log").appendChild(line);
  }
  function send(message) { window.parent.postMessage(message, "*"); }
  function request(method, params) {
    var id = nextId++;
    send({jsonrpc: "2.0", id: id, method: method, params: params || {}});
    return new Promise(function (resolve) { pending[id] = {method: method, resolve: resolve}; });
  }
  function notify(method, params) { send({jsonrpc: "2.0", method: method, params: params || {}}); }
  window.addEventListener("message", function (event) {
    var m = event.data;
    if (!m || m.jsonrpc !== "2.0") return;
    if (m.id !== undefined && pending[m.id]) {
      var p = pending[m.id];
      delete pending[m.id];
      log(p.method + " -> " + JSON.stringify(m.error ? {error: m.error} : m.result));
      p.resolve(m);
      return;
    }
    if (m.method === "ui/notifications/tool-input") {
      document.getElementById("input").textContent = JSON.stringify(m.params.arguments || {});
    } else if (m.method === "ui/notifications/tool-result") {
      var s = m.params.structuredContent;
      document.getElementById("result").textContent = s ? JSON.stringify(s) : "(no structured content)";
    } else if (m.method === "ui/notifications/tool-cancelled") {
      document.getElementById("cancelled").textContent = "cancelled: " + (m.params.reason || "");
    } else if (m.method === "ui/resource-teardown") {
      send({jsonrpc: "2.0", id: m.id, result: {}});
    }
  });
  function on(id, fn) { document.getElementById(id).addEventListener("click", fn); }
  on("refresh", function () {
    var city = JSON.parse(document.getElementById("input").textContent || "{}").city || "Lisbon";
    request("tools/call", {name: "refresh_weather", arguments: {city: city}}).then(function (m) {
      if (m.result && m.result.structuredContent) {
        document.getElementById("result").textContent = JSON.stringify(m.result.structuredContent);
      }
    });
  });
  on("order", function () {
    request("tools/call", {name: "place_order", arguments: {item: "umbrella"}});
  });
  on("read", function () { request("resources/read", {uri: "ui://weather/app.html"}); });
  on("message", function () {
    request("ui/message", {role: "user", content: [{type: "text", text: "What should I wear in Lisbon today?"}]});
  });
  on("context", function () {
    request("ui/update-model-context", {
      content: [{type: "text", text: "The user is looking at the Lisbon forecast: 21 C."}],
      structuredContent: {city: "Lisbon", temperature_c: 21}
    });
  });
  on("link", function () { request("ui/open-link", {url: "https://weather.example/lisbon"}); });
  on("fullscreen", function () { request("ui/request-display-mode", {mode: "fullscreen"}); });
  on("workspace", function () { request("ui/request-display-mode", {mode: "pip"}); });
  on("log-button", function () {
    notify("notifications/message", {level: "info", logger: "weather-app", data: "hello from the weather app"});
  });
  on("probe", function () {
    var out = {cookie: null, fetch: null};
    try { out.cookie = document.cookie; } catch (e) { out.cookie = "error: " + e.name; }
    var shown = document.getElementById("probe-result");
    try {
      fetch("/api/v1/me", {credentials: "include"}).then(function (r) {
        return r.text().then(function (t) { out.fetch = "status " + r.status + ": " + t.slice(0, 200); });
      }, function (e) { out.fetch = "error: " + (e && e.name); }).then(function () {
        shown.textContent = JSON.stringify(out);
      });
    } catch (e) {
      out.fetch = "error: " + e.name;
      shown.textContent = JSON.stringify(out);
    }
  });
  request("ui/initialize", {
    appInfo: {name: "weather-app", version: "1.0.0"},
    appCapabilities: {availableDisplayModes: ["inline", "fullscreen", "pip"]},
    protocolVersion: "2026-01-26"
  }).then(function (m) {
    document.getElementById("state").textContent = m.error ? "initialize failed" : "initialized";
    notify("ui/notifications/initialized", {});
    notify("ui/notifications/size-changed", {height: document.body.scrollHeight});
  });
})();
"""


def weather_html(label: str) -> str:
    """The weather app's page: markup, then the script above (inline: it is the app's own
    document, rendered in its sandbox, never chatmem's page)."""
    return (
        "<!doctype html>\n<html><head><meta charset='utf-8'><title>Weather</title></head>\n"
        "<body>\n"
        f"<h1>Weather <span id='label'>{label}</span></h1>\n"
        "<p id='state'>starting</p>\n"
        "<p>Input: <code id='input'></code></p>\n"
        "<p>Result: <code id='result'></code></p>\n"
        "<p id='cancelled'></p>\n"
        "<button id='refresh'>Refresh</button>\n"
        "<button id='order'>Order an umbrella</button>\n"
        "<button id='read'>Read resource</button>\n"
        "<button id='message'>Send message</button>\n"
        "<button id='context'>Update context</button>\n"
        "<button id='link'>Open link</button>\n"
        "<button id='fullscreen'>Fullscreen</button>\n"
        "<button id='workspace'>Open in workspace</button>\n"
        "<button id='log-button'>Send log</button>\n"
        "<button id='probe'>Probe</button>\n"
        "<pre id='probe-result'></pre>\n"
        "<div id='log'></div>\n"
        f"<script>{APP_SCRIPT}</script>\n"
        "</body></html>\n"
    )


CLOCK_HTML = (
    "<!doctype html><html><body><p id='clock'>a clock declared the older way</p>"
    "<script>window.parent.postMessage({jsonrpc: '2.0', id: 1, method: 'ui/initialize', "
    "params: {appInfo: {name: 'clock', version: '1'}, appCapabilities: {}, "
    "protocolVersion: '2026-01-26'}}, '*');</script></body></html>"
)


def build_app(version: str, label: str) -> Any:
    from mcp.server.apps import Apps, ResourceCsp, ResourcePermissions
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.resources import TextResource
    from mcp.server.transport_security import TransportSecuritySettings
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response

    apps = Apps()

    def weather(city: str) -> CallToolResult:
        reading = sum(CALLS[name] for name in ("get_weather", "refresh_weather"))
        data = {"city": city, "temperature_c": 21, "reading": reading}
        text = f"{city}: 21 C, sunny (reading {reading})."
        return CallToolResult(
            content=[TextContent(type="text", text=text)], structured_content=data
        )

    @apps.tool(resource_uri=WEATHER_URI, description="The weather in a city, with its app.")
    def get_weather(city: str = "Lisbon") -> CallToolResult:
        CALLS["get_weather"] += 1
        return weather(city)

    @apps.tool(
        resource_uri=WEATHER_URI,
        visibility=["app"],
        description="Refresh the weather (the app's own button).",
    )
    def refresh_weather(city: str) -> CallToolResult:
        CALLS["refresh_weather"] += 1
        return weather(city)

    @apps.tool(resource_uri=WEATHER_URI, description="Order an item for the weather.")
    def place_order(item: str) -> str:
        CALLS["place_order"] += 1
        return f"ordered one {item}"

    @apps.tool(
        resource_uri=WEATHER_URI, visibility=["model"], description="A lookup for the model."
    )
    def model_only_lookup(key: str) -> str:
        CALLS["model_only_lookup"] += 1
        return f"value of {key}"

    @apps.tool(resource_uri=BIG_URI, description="A tool whose app is too big to show.")
    def big_app() -> str:
        CALLS["big_app"] += 1
        return "big"

    apps.add_html_resource(
        WEATHER_URI,
        weather_html(label),
        csp=ResourceCsp(
            connect_domains=CONNECT_DOMAINS,
            resource_domains=RESOURCE_DOMAINS,
            frame_domains=FRAME_DOMAINS,
            base_uri_domains=BASE_URI_DOMAINS,
        ),
        permissions=ResourcePermissions(camera={}, clipboard_write={}),
        prefers_border=True,
    )
    filler = "<!-- " + "x" * (2 * 1024 * 1024 + 1000) + " -->"
    apps.add_html_resource(BIG_URI, f"<!doctype html><html><body>{filler}</body></html>")

    server = MCPServer("chatmem-test-apps", version=version, extensions=[apps])

    @server.tool(meta={"ui/resourceUri": CLOCK_URI})
    def legacy_clock() -> str:
        """The time, with an app declared the older way."""
        CALLS["legacy_clock"] += 1
        return "12:00"

    @server.tool()
    def plain_echo(text: str) -> str:
        """Return the text (a tool without an app)."""
        CALLS["plain_echo"] += 1
        return text

    server.add_resource(
        TextResource(
            uri=CLOCK_URI, name="clock", mime_type="text/html;profile=mcp-app", text=CLOCK_HTML
        )
    )

    @server.custom_route("/stats", methods=["GET"])
    async def stats(_: Request) -> Response:
        return JSONResponse({"calls": dict(CALLS), "reads": dict(READS)})

    app = server.streamable_http_app(
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )

    async def counted(scope: Any, receive: Any, send: Any) -> None:
        """Counts ``resources/read`` requests by URI (a test proves the HTML is cached)."""
        if scope["type"] != "http" or scope["method"] != "POST":
            await app(scope, receive, send)
            return
        chunks: list[bytes] = []
        more = True
        while more:
            message = await receive()
            chunks.append(message.get("body", b""))
            more = message.get("more_body", False)
        body = b"".join(chunks)
        with contextlib.suppress(ValueError, TypeError, AttributeError):
            import json

            parsed = json.loads(body)
            for item in parsed if isinstance(parsed, list) else [parsed]:
                if item.get("method") == "resources/read":
                    READS[str(item["params"]["uri"])] += 1
        replayed = False

        async def replay() -> Any:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await app(scope, replay, send)

    return counted


def main() -> None:
    import uvicorn

    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--version", default="1.0.0")
    parser.add_argument("--label", default="v1")
    args = parser.parse_args()
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", args.port))
    port = sock.getsockname()[1]
    app = build_app(args.version, args.label)
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
class McpAppServerProcess:
    """A running test MCP Apps server subprocess."""

    process: subprocess.Popen[str]
    port: int

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def stats(self) -> dict[str, Any]:
        return dict(httpx.get(f"http://127.0.0.1:{self.port}/stats", timeout=5).json())

    def stop(self) -> None:
        from tests.support.serve import stop_process

        stop_process(self.process, timeout=5)


@contextlib.contextmanager
def running_mcp_app_server(
    *, port: int = 0, version: str = "1.0.0", label: str = "v1"
) -> Iterator[McpAppServerProcess]:
    """The server as a subprocess; ``port`` 0 picks a free one (give the same port again to
    restart a server in place)."""
    root = Path(__file__).resolve().parents[2]
    cmd = [
        sys.executable,
        "-m",
        "tests.support.mcp_app_server",
        "--port",
        str(port),
        "--version",
        version,
        "--label",
        label,
    ]
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHATMEM_")}
    proc = subprocess.Popen(cmd, cwd=root, stdout=subprocess.PIPE, text=True, env=env)
    assert proc.stdout is not None
    deadline = time.monotonic() + 30
    found = 0
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if line.startswith("READY "):
            found = int(line.split()[1])
            break
        if not line and proc.poll() is not None:
            break
    if not found:
        proc.kill()
        raise RuntimeError("test MCP app server did not start")
    server = McpAppServerProcess(proc, found)
    try:
        yield server
    finally:
        server.stop()
        proc.stdout.close()


if __name__ == "__main__":
    main()
