"""A misbehaving MCP App costs the chat nothing (issue 28, APPS-2): one that throws while
starting, floods the page with messages, sends garbage, sends one huge message or never
initialises is stopped, and its place in the feed says why — with the tool's stored result
and a way to start it again — while the chat goes on.

The call is a real one (the test server with apps); the app's HTML is swapped on its way to
the page (the browser's own route of ``GET …/app``), as a broken server would send it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import expect
from tests.support.mcp_app_server import McpAppServerProcess, running_mcp_app_server
from tests.support.model_server import FakeModelServer
from tests.ui.apps_harness import app_view, ask, ask_for_tool, registered, started
from tests.ui.harness import Server, make_profile

pytestmark = pytest.mark.browser

INIT = (
    "function init(){parent.postMessage({jsonrpc:'2.0',id:1,method:'ui/initialize',params:"
    "{appInfo:{name:'bad',version:'1'},appCapabilities:{},protocolVersion:'2026-01-26'}},'*');}"
)
BROKEN = {
    "throws": "<script>throw new Error('the app broke on purpose');</script>",
    "floods": "<script>for (let i = 0; i < 5000; i++) parent.postMessage({jsonrpc:'2.0',"
    "method:'notifications/message',params:{level:'debug',data:i}}, '*');</script>",
    "garbage": "<script>for (let i = 0; i < 40; i++) parent.postMessage('not json-rpc ' + i,"
    " '*');</script>",
    "huge": "<script>parent.postMessage({jsonrpc:'2.0',method:'notifications/message',"
    "params:{level:'info',data:'x'.repeat(1500000)}}, '*');</script>",
    "silent": "<p>This app never says hello.</p>",
}
REASONS = {
    "throws": "it failed while starting: Uncaught Error: the app broke on purpose",
    "floods": "it sent too many messages",
    "garbage": "it sent messages that are not JSON-RPC",
    "huge": "it sent a message larger than 1 MB",
    "silent": "it did not start within 15 seconds",
}


@pytest.fixture(scope="module")
def app_server() -> Iterator[McpAppServerProcess]:
    with running_mcp_app_server() as process:
        yield process


@pytest.fixture(scope="module")
def weather(server: Server, app_server: McpAppServerProcess) -> Iterator[str]:
    server.add_user("badadmin", admin=True)
    with registered(server, "badadmin", app_server.url) as server_id:
        yield server_id


@pytest.fixture(scope="module")
def profile(server: Server, model: FakeModelServer) -> dict[str, Any]:
    with server.api("alice") as api:
        return make_profile(api, model.base_url, "Fake model")


def swap_html(page: Any, html: str) -> None:
    def route(route: Any) -> None:
        response = route.fetch()
        body = response.json()
        body["html"] = f"<!doctype html><html><head></head><body>{html}</body></html>"
        route.fulfill(response=response, body=json.dumps(body))

    page.route("**/api/v1/tool-calls/*/app", route)


@pytest.mark.parametrize("kind", list(BROKEN))
def test_a_broken_app_stops_in_place_and_the_chat_goes_on(
    alice: Any,
    model: FakeModelServer,
    weather: str,
    profile: Any,
    kind: str,
    console: Any,
) -> None:
    console.allow("the app broke on purpose|Failed to parse message|Invalid JSON-RPC")
    if kind == "silent":
        alice.clock.install()
    swap_html(alice, BROKEN[kind])
    ask_for_tool(alice, model, "get_weather", {"city": "Braga"}, f"Braga ({kind}).")
    view = app_view(alice)
    if kind == "silent":
        expect(view.locator(".app-frame")).to_be_visible()
        alice.clock.fast_forward(16_000)
    failure = view.get_by_role("alert")
    expect(failure).to_have_text(f"The app stopped: {REASONS[kind]}.")
    expect(view.locator(".app-frame")).to_have_count(0)
    view.locator("summary", has_text="Tool result").click()
    expect(view.locator("pre")).to_contain_text("Braga: 21 C")
    # The chat is untouched: the next question is answered.
    model.reply("Still here.")
    ask(alice, "Are you there?")
    expect(alice.locator(".message.role-assistant").last).to_contain_text("Still here.")
    # Started again (its HTML now as the server sends it), the app runs.
    alice.unroute("**/api/v1/tool-calls/*/app")
    view.get_by_role("button", name="Start the app again").click()
    expect(started(view).locator("#input")).to_have_text('{"city":"Braga"}')


def test_an_app_that_errs_after_starting_keeps_running_and_says_so(
    alice: Any, model: FakeModelServer, weather: str, profile: Any, console: Any
) -> None:
    console.allow("later on purpose")
    swap_html(
        alice,
        f"<p id='state'>starting</p><script>{INIT}"
        "addEventListener('message', function (e) { if (e.data && e.data.id === 1) {"
        "parent.postMessage({jsonrpc:'2.0',method:'ui/notifications/initialized',params:{}},'*');"
        "document.getElementById('state').textContent = 'initialized';"
        "setTimeout(function () { throw new Error('later on purpose'); }, 10); } });"
        "init();</script>",
    )
    ask_for_tool(alice, model, "get_weather", {"city": "Evora"}, "Evora.")
    view = app_view(alice)
    started(view)
    expect(view.locator(".app-note")).to_have_text(
        "The app reported an error: Uncaught Error: later on purpose"
    )
    expect(view.locator(".app-frame")).to_be_visible()
