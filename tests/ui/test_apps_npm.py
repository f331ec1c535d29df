"""A real MCP App from npm in the chat (issue 28): ``@modelcontextprotocol/server-basic-vanillajs``
2.0.3, the MCP Apps project's own example, pinned by ``tests/support/npm/package-lock.json`` and
installed by ``scripts/install_mcp_examples.sh`` (``.ci/run``, ``make mcp-examples``) into a
cache folder.  Without it the tests skip, unless CHATMEM_REQUIRE_SERVICES=1.

Its tool ``get-time`` has the app ``ui://get-time/mcp-app.html`` (built on the package's own
``App`` class): it renders with the tool's result; "Get Server Time" calls the tool again
through chatmem (recorded as called by the app); "Send Message" starts a turn with its text;
"Open Link" asks first; a reload renders it again without a call; and script run inside its
frame cannot read the cookie or fetch ``/api/v1/me`` with the user's session."""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import expect
from tests.conftest import skip_or_fail
from tests.support.model_server import FakeModelServer
from tests.ui.apps_harness import APP_CSP_NOISE, app_frame, app_view, ask_for_tool, registered
from tests.ui.harness import Server, free_port, make_profile, save_screenshot

pytestmark = pytest.mark.browser

PACKAGE = "@modelcontextprotocol/server-basic-vanillajs"
ISO_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+Z")


def examples_dir() -> Path:
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return Path(os.environ.get("MCP_EXAMPLES_DIR") or cache / "chatmem" / "mcp-examples")


@contextlib.contextmanager
def basic_server() -> Iterator[str]:
    """The example's streamable HTTP server on a free port (``PORT=N node dist/index.js``)."""
    entry = examples_dir() / "node_modules" / PACKAGE / "dist" / "index.js"
    if not entry.exists():
        skip_or_fail(f"{PACKAGE} is not installed (make mcp-examples)")
    port = free_port()
    env = {**os.environ, "PORT": str(port)}
    process = subprocess.Popen(
        ["node", str(entry)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                httpx.get(url, timeout=1)
                break
            except httpx.HTTPError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"{PACKAGE} did not start") from None
                time.sleep(0.05)
        yield url
    finally:
        process.terminate()
        process.wait(timeout=10)


@pytest.fixture(scope="module")
def basic(server: Server) -> Iterator[str]:
    server.add_user("npmadmin", admin=True)
    with basic_server() as url, registered(server, "npmadmin", url, name="basic") as server_id:
        yield server_id


@pytest.fixture(scope="module")
def profile(server: Server, model: FakeModelServer) -> dict[str, Any]:
    with server.api("alice") as api:
        return make_profile(api, model.base_url, "Fake model")


def app_calls(server: Server, server_id: str) -> list[dict[str, Any]]:
    with server.api("npmadmin") as api:
        items = api.get("/api/v1/admin/tool-calls", params={"server_id": server_id}).json()
    return [c for c in items["items"] if c["tool"] == "get-time"]


def test_the_npm_example_app_in_the_chat(
    alice: Any, model: FakeModelServer, basic: str, profile: Any, server: Server, console: Any
) -> None:
    console.allow(APP_CSP_NOISE + "|unsafe-eval|modelcontextprotocol.io|net::")
    ask_for_tool(alice, model, "get-time", {}, "Here is the server time.")
    frame = app_frame(app_view(alice))
    shown = frame.locator("#server-time")
    expect(shown).to_have_text(ISO_TIME)  # the tool's result, from the stored call
    first = shown.text_content()
    save_screenshot(alice, "app.png", readme=True)  # README: an app in the chat
    calls = app_calls(server, basic)
    assert [c["caller"] for c in calls] == ["model"]

    # "Get Server Time": the tool again, through chatmem, in the audit as the app's call.
    time.sleep(0.01)  # the server's clock must move on for the time to differ
    frame.get_by_role("button", name="Get Server Time").click()
    expect(shown).not_to_have_text(first or "")
    expect(shown).to_have_text(ISO_TIME)
    assert sorted(c["caller"] for c in app_calls(server, basic)) == ["app", "model"]

    # "Open Link" asks first; "Cancel" opens nothing.
    frame.get_by_role("button", name="Open Link").click()
    question = app_view(alice).get_by_role("group", name="The app wants to open a link:")
    expect(question.locator("pre")).to_have_text("https://modelcontextprotocol.io/")
    question.get_by_role("button", name="Cancel").click()
    assert len(alice.context.pages) == 1

    # "Send Message": a turn with the app's text.
    model.reply("Got your message.")
    frame.get_by_role("button", name="Send Message").click()
    expect(alice.locator(".message.role-user").last).to_contain_text("This is message text.")
    expect(alice.locator(".message.role-assistant").last).to_contain_text("Got your message.")

    # Script in the app's frame cannot read the cookie or use the session.
    inner = next(f for f in alice.frames if f.parent_frame and f.parent_frame.parent_frame)
    assert (
        inner.evaluate("() => { try { return document.cookie } catch (e) { return e.name } }")
        == "SecurityError"
    )
    fetched = inner.evaluate(
        "(url) => fetch(url, {credentials: 'include'}).then(r => r.status, e => e.name)",
        server.url + "/api/v1/me",
    )
    assert fetched == "TypeError"

    # A reload renders it again from the stored call: the first time, no new call.
    before = len(app_calls(server, basic))
    alice.reload()
    expect(app_frame(app_view(alice)).locator("#server-time")).to_have_text(first or "")
    assert len(app_calls(server, basic)) == before
