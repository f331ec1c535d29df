"""APPS-2: the outer frame of an MCP App, ``GET /apps/sandbox`` — its policy is built from the
domains the resource declares (none declared, none allowed), it is sandboxed into an opaque
origin, framed by chatmem's pages only, and needs no session; and the vendored bridge the
chat page loads is the one ``static/vendor/SOURCES.md`` records, with that integrity.

The browser side (the app really cannot read the cookie or call the API) is in
``tests/ui/test_apps.py``."""

from __future__ import annotations

import base64
import hashlib
import re
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from tests.support.app import make_user

from chatmem.web.ui.assets import APP_BRIDGE, STATIC_DIR
from chatmem.web.ui.sandbox import MAX_DOMAINS, csp_source

SQLITE = pytest.mark.parametrize("backend", ["sqlite"])


def _policy(response: object) -> dict[str, list[str]]:
    header = response.headers["content-security-policy"]  # type: ignore[attr-defined]
    parts = [part.split() for part in header.split(";") if part.strip()]
    return {words[0]: words[1:] for words in parts}


@SQLITE
def test_nothing_declared_nothing_allowed(client: TestClient) -> None:
    response = client.get("/apps/sandbox")
    assert response.status_code == 200
    policy = _policy(response)
    assert policy["sandbox"] == ["allow-scripts"]  # no allow-same-origin: an opaque origin
    assert policy["default-src"] == ["'none'"]
    for directive in ("connect-src", "frame-src", "base-uri", "form-action", "object-src"):
        assert policy[directive] == ["'none'"], directive
    assert policy["frame-ancestors"] == ["'self'"]
    assert response.headers["x-frame-options"] == "SAMEORIGIN"
    assert response.headers["referrer-policy"] == "no-referrer"
    # The one script of chatmem's it may run is the proxy's, by its full path; no eval.
    scripts = policy["script-src"]
    assert scripts[0].endswith("/static/apps_sandbox.js") and scripts[0].startswith("http://")
    assert scripts[1:] == ["'unsafe-inline'"]
    assert [d for d, words in policy.items() if "'self'" in words] == ["frame-ancestors"]
    assert "unsafe-eval" not in response.headers["content-security-policy"]
    assert policy["img-src"] == ["data:", "blob:"]
    assert re.search(r'<script src="/static/apps_sandbox\.js\?v=[^"]+"></script>', response.text)
    assert not re.search(r"<script(?![^>]*\bsrc=)", response.text)  # nothing inline
    assert client.get(re.search(r'src="([^"]+)"', response.text)[1]).status_code == 200  # type: ignore[index]


@SQLITE
def test_the_declared_domains_make_the_policy(client: TestClient) -> None:
    response = client.get(
        "/apps/sandbox",
        params=[
            ("connect", "https://api.weather.example"),
            ("connect", "wss://live.weather.example"),
            ("resource", "cdn.weather.example"),
            ("resource", "https://*.fonts.example/"),
            ("frame", "https://maps.weather.example"),
            ("base", "https://weather.example"),
        ],
    )
    policy = _policy(response)
    assert policy["connect-src"] == ["https://api.weather.example", "wss://live.weather.example"]
    loads = ["https://cdn.weather.example", "https://*.fonts.example"]
    assert policy["script-src"][1:] == ["'unsafe-inline'", *loads]
    assert policy["style-src"] == ["'unsafe-inline'", *loads]
    assert policy["img-src"] == ["data:", "blob:", *loads]
    assert policy["font-src"] == ["data:", *loads]
    assert policy["frame-src"] == ["https://maps.weather.example"]
    assert policy["base-uri"] == ["https://weather.example"]
    assert policy["sandbox"] == ["allow-scripts"]


@SQLITE
@pytest.mark.parametrize(
    "hostile",
    [
        "http://plain.example",  # not https
        "https://x.example/path",  # a path
        "x.example; script-src *",  # a second directive
        "x.example 'unsafe-eval'",
        "'self'",
        "*",
        "https://*",
        "*.com",
        "data:",
        "javascript:alert(1)",
        "wss://socket.example",  # a WebSocket is for connect only
        "https://a..b",
        "x" * 300 + ".example",
    ],
)
def test_what_is_no_https_origin_or_host_is_left_out(client: TestClient, hostile: str) -> None:
    response = client.get(
        "/apps/sandbox", params=[("resource", hostile), ("resource", "good.example")]
    )
    assert response.status_code in (200, 422)
    if response.status_code == 200:
        policy = _policy(response)
        assert policy["style-src"] == ["'unsafe-inline'", "https://good.example"], hostile
        assert policy["sandbox"] == ["allow-scripts"]
        assert len(policy) == 13


def test_domains_are_bounded() -> None:
    assert csp_source("HTTPS://CDN.Example.com:8443/") == "https://cdn.example.com:8443"
    assert csp_source("wss://rt.example", websocket=True) == "wss://rt.example"
    assert MAX_DOMAINS == 32


@SQLITE
def test_many_domains_stop_at_the_bound(client: TestClient) -> None:
    params = [("connect", f"https://h{i}.example") for i in range(MAX_DOMAINS + 10)]
    assert len(_policy(client.get("/apps/sandbox", params=params))["connect-src"]) == MAX_DOMAINS


@SQLITE
def test_the_page_needs_no_session_and_sets_none(client: TestClient) -> None:
    client.cookies.clear()
    response = client.get("/apps/sandbox")
    assert response.status_code == 200 and "set-cookie" not in response.headers


def _sources_sha384() -> str:
    sources = (STATIC_DIR / "vendor" / "SOURCES.md").read_text(encoding="utf-8")
    found = re.search(r"`(sha384-[A-Za-z0-9+/=]+)`", sources)
    assert found, "SOURCES.md records the bridge's sha384"
    return found[1]


def test_the_vendored_bridge_is_the_one_sources_md_records() -> None:
    path = STATIC_DIR / APP_BRIDGE
    data = path.read_bytes()
    digest = "sha384-" + base64.b64encode(hashlib.sha384(data).digest()).decode()
    assert digest == _sources_sha384()
    sha256 = hashlib.sha256(data).hexdigest()
    assert f"{sha256}  {path.name}" in (STATIC_DIR / "vendor" / "SOURCES.md").read_text()
    assert data.startswith(b"/*! @modelcontextprotocol/ext-apps 2.0.4 app-bridge")
    assert (path.parent / (Path(APP_BRIDGE).stem + ".LICENSE")).exists()


@SQLITE
def test_the_chat_page_loads_the_bridge_with_its_integrity(client: TestClient) -> None:
    make_user(client, "alice", password="correct horse battery")
    login = client.post(
        "/api/v1/auth/login", json={"name": "alice", "password": "correct horse battery"}
    )
    assert login.status_code == 200, login.text
    page = client.get("/").text
    assert 'id="draft"' in page
    url = re.search(r'data-app-bridge="([^"]+)"', page)
    integrity = re.search(r'data-app-bridge-integrity="([^"]+)"', page)
    assert url and integrity and integrity[1] == _sources_sha384()
    assert client.get(url[1].replace("&amp;", "&")).status_code == 200
    assert "frame-src 'self'" in client.get("/").headers["content-security-policy"]
