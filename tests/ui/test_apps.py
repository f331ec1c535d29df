"""MCP Apps in the feed, in Chromium (APPS-1, APPS-2, APPS-3), against the test server with apps
(:mod:`tests.support.mcp_app_server`): the app renders under its call fed the call's input
and whole result, with the host context; a reload renders it again without calling the tool;
it cannot read the cookie or call the API; what it asks goes through chatmem (tool calls in
the audit, "ask first" asked under it, a blocked tool refused, a resource read, a message that
starts a turn, model context stored, a link opened only after a yes and never in the chat's
tab, full screen); its logs go to the console; a stopped call tells it; its server down, the
stored result shows with a note."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from playwright.sync_api import expect
from tests.support.mcp_app_server import McpAppServerProcess, running_mcp_app_server
from tests.support.mcp_server import wait_until_ready
from tests.support.model_server import FakeModelServer
from tests.ui.apps_harness import (
    APP_CSP_NOISE,
    app_view,
    ask,
    ask_for_tool,
    log_lines,
    registered,
    started,
)
from tests.ui.harness import Server, make_profile

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def app_server() -> Iterator[McpAppServerProcess]:
    with running_mcp_app_server() as process:
        yield process


@pytest.fixture(scope="module")
def weather(server: Server, app_server: McpAppServerProcess) -> Iterator[dict[str, Any]]:
    """The app server, registered by an administrator; ``place_order`` asks first."""
    server.add_user("appadmin", admin=True)
    with registered(server, "appadmin", app_server.url, ask_first_tools=["place_order"]) as sid:
        yield {"id": sid, "process": app_server}


@pytest.fixture(scope="module")
def profile(server: Server, model: FakeModelServer) -> dict[str, Any]:
    with server.api("alice") as api:
        return make_profile(api, model.base_url, "Fake model")


@pytest.fixture
def weather_app(
    alice: Any, model: FakeModelServer, weather: dict[str, Any], profile: Any
) -> tuple[Any, Any]:
    """A new chat whose answer called get_weather for Porto: its app view and started frame."""
    ask_for_tool(alice, model, "get_weather", {"city": "Porto"}, "It is sunny in Porto.")
    view = app_view(alice)
    return view, started(view)


def test_apps1_the_app_renders_under_its_call_with_input_result_and_host_context(
    alice: Any, weather_app: tuple[Any, Any]
) -> None:
    view, frame = weather_app
    call = alice.locator(".message.role-assistant .tool-call", has_text="get_weather").first
    expect(call.locator("xpath=following-sibling::*[1]")).to_have_class("app-slot")
    expect(frame.locator("#input")).to_have_text('{"city":"Porto"}')
    result = json.loads(frame.locator("#result").text_content() or "{}")
    assert result["city"] == "Porto" and result["temperature_c"] == 21  # structuredContent
    initialize = next(line for line in log_lines(frame) if line.startswith("ui/initialize"))
    answer = json.loads(initialize.split(" -> ", 1)[1])
    context = answer["hostContext"]
    assert context["theme"] == "light" and context["locale"] == "en"
    assert context["displayMode"] == "inline" and context["platform"] == "web"
    assert {"inline", "fullscreen"} <= set(context["availableDisplayModes"])
    assert context["containerDimensions"]["maxHeight"] >= 240
    assert context["containerDimensions"]["width"] > 300
    assert answer["hostInfo"]["name"] == "chatmem"
    # size-changed: the frame grew to the app's height, within the bound.
    height = view.locator(".app-frame").evaluate("f => f.getBoundingClientRect().height")
    assert 150 < height <= context["containerDimensions"]["maxHeight"]
    expect(view).to_have_accessible_name("App: get_weather")


def test_apps1_a_reload_renders_the_app_from_the_stored_call(
    alice: Any, weather_app: tuple[Any, Any], weather: dict[str, Any]
) -> None:
    _, frame = weather_app
    before = frame.locator("#result").text_content()
    calls = weather["process"].stats()["calls"]
    alice.reload()
    again = started(app_view(alice))
    expect(again.locator("#result")).to_have_text(before or "")
    expect(again.locator("#input")).to_have_text('{"city":"Porto"}')
    assert weather["process"].stats()["calls"] == calls  # the tool was not called again


def test_apps2_the_app_cannot_read_the_cookie_or_use_the_session(
    alice: Any, weather_app: tuple[Any, Any], console: Any, server: Server
) -> None:
    console.allow(APP_CSP_NOISE)
    _, frame = weather_app
    frame.locator("#probe").click()
    expect(frame.locator("#probe-result")).not_to_be_empty()
    probe = json.loads(frame.locator("#probe-result").text_content() or "{}")
    assert probe["cookie"] == "error: SecurityError"
    assert probe["fetch"].startswith("error")  # refused by the policy: nothing was sent
    # Neither frame between the app and the chat page has chatmem's origin.
    proxy, inner = (f for f in alice.frames if f != alice.main_frame)
    assert proxy.evaluate("self.origin") == "null" and inner.evaluate("self.origin") == "null"
    reach = "() => { try { return top.document.title } catch (e) { return e.name } }"
    assert proxy.evaluate(reach) == inner.evaluate(reach) == "SecurityError"
    # Even script the browser runs in the frames for us cannot fetch with the session.
    fetch = "(url) => fetch(url, {credentials: 'include'}).then(r => r.status, e => e.name)"
    me = server.url + "/api/v1/me"
    assert proxy.evaluate(fetch, me) == inner.evaluate(fetch, me) == "TypeError"
    assert "chatmem_csrf" in alice.evaluate("document.cookie")  # the chat's own page has it


def test_apps3_tool_calls_go_through_chatmem_and_the_audit(
    alice: Any, weather_app: tuple[Any, Any], weather: dict[str, Any], server: Server
) -> None:
    _, frame = weather_app
    shown = frame.locator("#result").text_content() or "{}"
    before = json.loads(shown)["reading"]
    frame.locator("#refresh").click()
    expect(frame.locator("#result")).not_to_have_text(shown)
    after = json.loads(frame.locator("#result").text_content() or "{}")
    assert after["reading"] > before and after["city"] == "Porto"
    assert weather["process"].stats()["calls"]["refresh_weather"] >= 1
    with server.api("appadmin") as api:
        calls = api.get("/api/v1/admin/tool-calls", params={"server_id": weather["id"]}).json()
    refresh = next(c for c in calls["items"] if c["tool"] == "refresh_weather")
    assert refresh["caller"] == "app" and refresh["user"]["name"] == "alice"


def test_apps3_an_ask_first_tool_is_asked_under_the_app(
    alice: Any, weather_app: tuple[Any, Any], console: Any
) -> None:
    console.allow(r"HTTP 409 POST .*/app/tools-call")  # approval_required, then asked
    view, frame = weather_app
    frame.locator("#order").click()
    question = view.get_by_role(
        "group", name="The app asks to run the tool place_order on weather."
    )
    expect(question.locator("pre")).to_contain_text('"item": "umbrella"')
    question.get_by_role("button", name="Refuse").click()
    expect(frame.locator("#log")).to_contain_text("refused this tool call")
    frame.locator("#order").click()
    view.get_by_role("button", name="Approve").click()
    expect(frame.locator("#log")).to_contain_text("ordered one umbrella")


def test_apps3_a_blocked_tool_is_refused_with_an_error_the_app_receives(
    alice: Any, weather_app: tuple[Any, Any], weather: dict[str, Any], server: Server, console: Any
) -> None:
    console.allow(r"HTTP 403 POST .*/app/tools-call")  # forbidden, answered to the app
    _, frame = weather_app
    with server.api("appadmin") as api:
        api.patch(
            f"/api/v1/mcp-servers/{weather['id']}",
            json={"allowed_tools": ["get_weather", "place_order"]},
        ).raise_for_status()
        try:
            frame.locator("#refresh").click()
            expect(frame.locator("#log")).to_contain_text('tools/call -> {"error"')
        finally:
            api.patch(
                f"/api/v1/mcp-servers/{weather['id']}", json={"allowed_tools": None}
            ).raise_for_status()


def test_apps3_a_resource_of_its_own_server_is_read(weather_app: tuple[Any, Any]) -> None:
    _, frame = weather_app
    frame.locator("#read").click()
    expect(frame.locator("#log")).to_contain_text('resources/read -> {"contents"')


def test_apps3_a_message_from_the_app_starts_a_turn(
    alice: Any, weather_app: tuple[Any, Any], model: FakeModelServer
) -> None:
    _, frame = weather_app
    model.reply("A light jacket will do.")
    frame.locator("#message").click()
    sent = alice.locator(".message.role-user").last
    expect(sent).to_contain_text("What should I wear in Lisbon today?")
    expect(sent.locator(".from-app")).to_have_text("Sent by the app get_weather")
    expect(alice.locator(".message.role-assistant").last).to_contain_text("A light jacket")
    expect(frame.locator("#log")).to_contain_text("ui/message -> {}")
    assert "What should I wear in Lisbon today?" in json.dumps(model.chat_requests[-1].messages)
    alice.reload()
    expect(alice.locator(".message.role-user").last.locator(".from-app")).to_be_visible()


def test_apps3_the_model_context_is_stored_and_counted(
    alice: Any, weather_app: tuple[Any, Any], server: Server
) -> None:
    paths = httpx.get(server.url + "/openapi.json", timeout=30).json()["paths"]
    if not any(path.endswith("/app-context") for path in paths):  # the apps-context branch's
        pytest.skip("this server stores no app context yet")
    _, frame = weather_app
    with alice.expect_response(lambda r: r.url.endswith("/app-context")) as put:
        frame.locator("#context").click()
    assert put.value.status == 200 and put.value.request.method == "PUT"
    expect(frame.locator("#log")).to_contain_text("ui/update-model-context -> {}")
    alice.locator("#counter").click()
    expect(alice.get_by_role("dialog").get_by_text("Apps", exact=True)).to_be_visible()


def test_apps3_a_link_opens_after_a_yes_in_a_new_tab_that_cannot_reach_back(
    alice: Any, weather_app: tuple[Any, Any], console: Any
) -> None:
    alice.context.route("https://weather.example/**", lambda route: route.fulfill(body="Lisbon"))
    view, frame = weather_app
    chat_url = alice.url
    frame.locator("#link").click()
    question = view.get_by_role("group", name="The app wants to open a link:")
    expect(question.locator("pre")).to_have_text("https://weather.example/lisbon")
    question.get_by_role("button", name="Cancel").click()
    expect(frame.locator("#log")).to_contain_text('ui/open-link -> {"isError":true}')
    assert len(alice.context.pages) == 1
    frame.locator("#link").click()
    with alice.context.expect_page() as opened:
        view.get_by_role("button", name="Open link").click()
    tab = opened.value
    tab.wait_for_load_state()
    assert tab.url == "https://weather.example/lisbon"
    assert tab.evaluate("window.opener") is None
    tab.close()
    assert alice.url == chat_url
    expect(frame.locator("#log")).to_contain_text("ui/open-link -> {}")


def test_apps3_full_screen_and_back(alice: Any, weather_app: tuple[Any, Any]) -> None:
    view, frame = weather_app
    frame.locator("#fullscreen").click()
    expect(view).to_have_class("app-view app-border app-fullscreen")
    box = view.bounding_box()
    assert box and box["width"] >= 1270 and box["height"] >= 850
    expect(frame.locator("#log")).to_contain_text(
        'ui/request-display-mode -> {"mode":"fullscreen"}'
    )
    view.get_by_role("button", name="Exit full screen").click()
    expect(view).not_to_have_class("app-view app-border app-fullscreen")


def test_apps3_logs_go_to_the_browser_console(alice: Any, weather_app: tuple[Any, Any]) -> None:
    _, frame = weather_app
    with alice.expect_console_message(lambda m: "hello from the weather app" in m.text) as log:
        frame.locator("#log-button").click()
    assert log.value.type == "info"


def test_apps1_a_stopped_call_tells_its_app(
    alice: Any, model: FakeModelServer, weather: dict[str, Any], profile: Any
) -> None:
    """place_order asks first: the app shows at once; Stop before answering cancels it."""
    model.tool_call("place_order", {"item": "boots"}, id="call_stopped")
    ask(alice, "Order boots.")
    expect(alice.get_by_role("group", name="Tool call waiting for your approval")).to_be_visible()
    frame = started(app_view(alice))
    alice.get_by_role("button", name="Stop").click()
    expect(frame.locator("#cancelled")).to_contain_text("cancelled")
    expect(alice.get_by_role("button", name="Send")).to_be_visible()


def test_apps1_its_server_down_the_stored_result_shows_with_a_note(
    alice: Any, model: FakeModelServer, server: Server, profile: Any, weather: dict[str, Any]
) -> None:
    # A second server with the same tools, the first one switched off meanwhile.
    with server.api("appadmin") as admin:
        admin.patch(f"/api/v1/mcp-servers/{weather['id']}", json={"enabled": False})
    with (
        running_mcp_app_server(label="down") as process,
        registered(server, "appadmin", process.url, name="down") as server_id,
    ):
        ask_for_tool(alice, model, "get_weather", {"city": "Faro"}, "Faro is warm.")
        started(app_view(alice))
        call_id = app_view(alice).get_attribute("data-tool-call-id")
        process.stop()
        # chatmem notices a dead server on its next request to it: a change of the server
        # reconnects it at once (and fails), then the app says so.
        with server.api("appadmin") as admin:
            admin.patch(f"/api/v1/mcp-servers/{server_id}", json={"connect_timeout": 1})
        with server.api("alice") as api:
            deadline = time.monotonic() + 20
            while api.get(f"/api/v1/tool-calls/{call_id}/app").json()["available"]:
                assert time.monotonic() < deadline, "chatmem never noticed the server down"
                time.sleep(0.2)
        alice.reload()
        view = app_view(alice)
        expect(view.locator(".app-unavailable")).to_contain_text("unreachable")
        expect(view).to_contain_text("Faro: 21 C")
        expect(view.locator(".app-frame")).to_have_count(0)
    with server.api("appadmin") as admin:
        admin.patch(f"/api/v1/mcp-servers/{weather['id']}", json={"enabled": True})
        wait_until_ready(admin.get, weather["id"])
