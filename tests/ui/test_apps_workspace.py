"""The Live Workspace and the administrators' app settings, in Chromium (APPS-4, APPS-1):
an app moves into the panel beside the chat (its button, or its request for the display mode
``pip``) and stays there, running, across turns and reloads; "Show it here" brings it back; an
administrator's workspace tool opens from the conversation menu; on a phone the panel is a
full-screen sheet; the Models page shows which tools have an app and sets "show apps", the
workspace tool and the apps' permissions; axe finds nothing serious with an app on screen."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from axe_playwright_python.sync_playwright import Axe
from playwright.sync_api import expect
from tests.support.mcp_app_server import McpAppServerProcess, running_mcp_app_server
from tests.support.model_server import FakeModelServer
from tests.ui.apps_harness import app_frame, app_view, ask, ask_for_tool, registered, started
from tests.ui.conftest import sign_in
from tests.ui.harness import Server, make_profile

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def app_server() -> Iterator[McpAppServerProcess]:
    with running_mcp_app_server() as process:
        yield process


@pytest.fixture(scope="module")
def weather(server: Server, app_server: McpAppServerProcess) -> Iterator[dict[str, Any]]:
    server.add_user("wsadmin", admin=True)
    with registered(server, "wsadmin", app_server.url) as server_id:
        yield {"id": server_id, "process": app_server}


@pytest.fixture(scope="module")
def profile(server: Server, model: FakeModelServer) -> dict[str, Any]:
    with server.api("alice") as api:
        return make_profile(api, model.base_url, "Fake model")


@pytest.fixture(scope="module")
def workspaces(server: Server, profile: Any) -> None:
    """The Live Workspace needs the server's side of it (a conversation's ``workspace``)."""
    with server.api("alice") as api:
        c = api.post("/api/v1/conversations", json={"title": "probe"}).json()
        api.delete(f"/api/v1/conversations/{c['id']}")
    if "workspace" not in c:
        pytest.skip("this server keeps no Live Workspace (its conversations have no workspace)")


def panel(page: Any) -> Any:
    return page.get_by_role("complementary", name="Live Workspace")


def test_apps4_an_app_stays_in_the_workspace_across_turns_and_reloads(
    alice: Any, model: FakeModelServer, weather: dict[str, Any], profile: Any, workspaces: None
) -> None:
    ask_for_tool(alice, model, "get_weather", {"city": "Coimbra"}, "Coimbra is mild.")
    frame = started(app_view(alice))
    frame.locator("#workspace").click()  # ui/request-display-mode "pip"
    expect(panel(alice)).to_be_visible()
    in_panel = started(panel(alice).locator(".app-view"))
    expect(in_panel.locator("#input")).to_have_text('{"city":"Coimbra"}')
    expect(alice.locator(".feed .app-elsewhere")).to_contain_text(
        "This app is open in the Live Workspace."
    )
    # It kept running as it moved: its log still has the line from before the move.
    expect(in_panel.locator("#log")).to_contain_text('ui/request-display-mode -> {"mode":"pip"}')
    # Another turn: the app is still there, still the same document.
    in_panel.locator("#log-button").click()
    model.reply("Still mild.")
    ask(alice, "And tomorrow?")
    expect(alice.locator(".message.role-assistant").last).to_contain_text("Still mild.")
    expect(in_panel.locator("#log")).to_contain_text('ui/request-display-mode -> {"mode":"pip"}')
    # A reload: the conversation says which app is in its workspace.
    alice.reload()
    expect(started(panel(alice).locator(".app-view")).locator("#input")).to_have_text(
        '{"city":"Coimbra"}'
    )
    # "Show it here": back under its call, the panel closed (DELETE …/workspace).
    with alice.expect_response(lambda r: r.request.method == "DELETE") as closed:
        alice.get_by_role("button", name="Show it here").click()
    assert closed.value.status in (200, 204)
    expect(panel(alice)).to_be_hidden()
    expect(started(app_view(alice)).locator("#input")).to_have_text('{"city":"Coimbra"}')
    alice.reload()
    expect(panel(alice)).to_be_hidden()


def test_apps4_the_open_in_workspace_button_and_close(
    alice: Any, model: FakeModelServer, weather: dict[str, Any], profile: Any, workspaces: None
) -> None:
    ask_for_tool(alice, model, "get_weather", {"city": "Aveiro"}, "Aveiro is windy.")
    view = app_view(alice)
    started(view)
    view.get_by_role("button", name="Open in workspace").click()
    expect(panel(alice).locator(".app-view")).to_have_count(1)
    panel(alice).get_by_role("button", name="Close").click()
    expect(panel(alice)).to_be_hidden()
    expect(alice.locator(".feed .app-view")).to_have_count(1)


def test_apps4_the_administrators_workspace_tool_opens_from_the_menu(
    alice: Any,
    model: FakeModelServer,
    weather: dict[str, Any],
    profile: Any,
    server: Server,
    workspaces: None,
) -> None:
    with server.api("wsadmin") as admin:
        admin.patch(
            f"/api/v1/mcp-servers/{weather['id']}", json={"workspace_tool": "get_weather"}
        ).raise_for_status()
    try:
        model.reply("Hello.")
        ask(alice, "Hi")
        expect(alice.locator(".message.role-assistant").last).to_contain_text("Hello.")
        alice.reload()  # the offers are read once per page
        calls = weather["process"].stats()["calls"].get("get_weather", 0)
        asked = len(model.chat_requests)
        alice.get_by_role("button", name="Open Live Workspace").click()
        frame = started(panel(alice).locator(".app-view"))
        expect(frame.locator("#result")).to_contain_text('"city"')
        assert weather["process"].stats()["calls"]["get_weather"] == calls + 1
        assert len(model.chat_requests) == asked  # no model turn
    finally:
        with server.api("wsadmin") as admin:
            admin.patch(f"/api/v1/mcp-servers/{weather['id']}", json={"workspace_tool": None})


def test_apps4_on_a_phone_the_workspace_is_a_full_screen_sheet(
    alice: Any, model: FakeModelServer, weather: dict[str, Any], profile: Any, workspaces: None
) -> None:
    ask_for_tool(alice, model, "get_weather", {"city": "Porto"}, "Porto, phone.")
    alice.set_viewport_size({"width": 390, "height": 844})
    view = app_view(alice)
    started(view)
    view.get_by_role("button", name="Open in workspace").click()
    expect(panel(alice)).to_be_visible()
    box = panel(alice).bounding_box()
    assert box and box["x"] == 0 and box["y"] == 0 and box["width"] == 390
    assert box["height"] == 844
    started(panel(alice).locator(".app-view"))
    panel(alice).get_by_role("button", name="Close").click()
    expect(panel(alice)).to_be_hidden()


def test_apps_axe_finds_nothing_serious_with_an_app_and_the_workspace(
    alice: Any, model: FakeModelServer, weather: dict[str, Any], profile: Any
) -> None:
    ask_for_tool(alice, model, "get_weather", {"city": "Lagos"}, "Lagos is hot.")
    view = app_view(alice)
    started(view)
    found = Axe().run(alice).response["violations"]
    serious = [v["id"] for v in found if v["impact"] in ("serious", "critical")]
    assert serious == [], serious
    if view.get_by_role("button", name="Open in workspace").count():
        view.get_by_role("button", name="Open in workspace").click()
        started(panel(alice).locator(".app-view"))
        found = Axe().run(alice).response["violations"]
        serious = [v["id"] for v in found if v["impact"] in ("serious", "critical")]
        assert serious == [], serious
        panel(alice).get_by_role("button", name="Close").click()


def test_apps1_the_models_page_shows_apps_and_sets_them(
    page: Any,
    console: Any,
    alice: Any,
    model: FakeModelServer,
    weather: dict[str, Any],
    profile: Any,
    server: Server,
) -> None:
    # A turn's tools are those its server's session listed: one running while the change
    # reconnects it may still show the app live (whose GET …/app then answers 404).
    console.allow(r"HTTP 404 GET .*/app$")
    sign_in(page, server, "wsadmin")
    page.goto(server.url + "/profiles")
    item = page.locator(f'li[data-id="{weather["id"]}"]')
    item.locator("summary", has_text="Tools").click()
    rows = {
        row.locator("td").first.text_content(): row.locator("td").nth(1).text_content()
        for row in item.locator(".mcp-tools tbody tr").all()
    }
    assert rows["get_weather"] == "App" and rows["refresh_weather"] == "App only"
    assert rows["plain_echo"] == "—"
    show = item.get_by_role("checkbox", name="Show apps in the chat")
    expect(show).to_be_checked()
    item.get_by_label("Live Workspace tool").select_option("get_weather")
    item.get_by_role("checkbox", name="Camera").check()
    show.uncheck()
    item.get_by_role("button", name="Save tools").click()
    expect(item.get_by_role("status")).to_have_text("Saved")
    with server.api("wsadmin") as admin:
        saved = admin.get(f"/api/v1/mcp-servers/{weather['id']}").json()
        assert saved["show_apps"] is False and saved["workspace_tool"] == "get_weather"
        assert saved["app_permissions"] == ["camera"]
        try:
            # Apps off: a new call shows none.
            ask_for_tool(alice, model, "get_weather", {"city": "Beja"}, "Beja, no app.")
            alice.reload()
            expect(alice.locator(".message.role-assistant").last).to_contain_text("Beja, no app.")
            expect(alice.locator(".app-view")).to_have_count(0)
        finally:
            admin.patch(
                f"/api/v1/mcp-servers/{weather['id']}",
                json={"show_apps": True, "workspace_tool": None, "app_permissions": []},
            ).raise_for_status()
    # Apps back on: the same stored call shows its app.
    alice.reload()
    expect(app_frame(app_view(alice)).locator("#input")).to_have_text('{"city":"Beja"}')
