"""Tool servers in the browser: "ask first" calls answered in the feed (PROV-6), and each MCP
server's health and tool policy on the Models page for administrators (PROV-3)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import expect
from tests.support.hung_server import hung_server
from tests.support.mcp_server import running_mcp_server, wait_until_ready
from tests.support.model_server import FakeModelServer
from tests.ui.conftest import sign_in
from tests.ui.harness import Server, make_profile

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def profiles(server: Server, model: FakeModelServer) -> dict[str, dict[str, Any]]:
    with server.api("alice") as api:
        return {"main": make_profile(api, model.base_url, "Fake model")}


@pytest.fixture(scope="module")
def tools(server: Server) -> Iterator[dict[str, Any]]:
    """A working server whose ``add`` asks first, and a hung one next to it."""
    server.add_user("tooladmin", admin=True)
    with (
        running_mcp_server(token="mcp-secret") as mcp,
        hung_server() as hung,
        server.api("tooladmin") as admin,
    ):
        working = admin.post(
            "/api/v1/mcp-servers",
            json={
                "name": "tools",
                "url": mcp.url,
                "bearer_token": "mcp-secret",
                "ask_first_tools": ["add"],
            },
        )
        stuck = admin.post(
            "/api/v1/mcp-servers",
            json={"name": "stuck", "url": hung.url, "connect_timeout": 0.5},
        )
        assert working.status_code == stuck.status_code == 201, (working.text, stuck.text)
        wait_until_ready(admin.get, working.json()["id"])
        try:
            yield {"admin": admin, "working": working.json()["id"], "stuck": stuck.json()["id"]}
        finally:
            for created in (working, stuck):
                admin.delete(f"/api/v1/mcp-servers/{created.json()['id']}")


def _ask(page: Any, text: str) -> None:
    page.get_by_role("textbox", name="Message").fill(text)
    page.get_by_role("textbox", name="Message").press("Enter")


def test_prov6_an_ask_first_call_waits_for_approve_in_the_feed(
    alice: Any, model: FakeModelServer, profiles: Any, tools: dict[str, Any]
) -> None:
    model.tool_call("add", {"a": 2, "b": 3}, id="call_add")
    model.reply("Two plus three is 5.")
    _ask(alice, "What is 2 + 3? Use the tool.")
    box = alice.get_by_role("group", name="Tool call waiting for your approval")
    expect(box).to_contain_text("Run the tool add on tools?")
    expect(box.locator("pre")).to_have_text('{"a": 2, "b": 3}')
    expect(alice.get_by_role("button", name="Stop")).to_be_visible()  # the turn waits
    box.get_by_role("button", name="Approve").click()
    expect(box).to_contain_text("Approved")
    expect(alice.locator(".tool-result summary").first).to_have_text("Tool result: add")
    expect(alice.locator(".message.role-assistant").last).to_contain_text("Two plus three is 5.")
    expect(alice.get_by_role("button", name="Send")).to_be_visible()


def test_prov6_a_refused_call_is_not_made_and_the_feed_says_so(
    alice: Any, model: FakeModelServer, profiles: Any, tools: dict[str, Any]
) -> None:
    model.tool_call("add", {"a": 40, "b": 2}, id="call_no")
    model.reply("All right, I did not add them.")
    _ask(alice, "What is 40 + 2? Use the tool.")
    box = alice.get_by_role("group", name="Tool call waiting for your approval")
    box.get_by_role("button", name="Refuse").click()
    expect(box).to_contain_text("Refused")
    result = alice.locator(".tool-result").first
    result.locator("summary").click()
    expect(result.locator("pre")).to_have_text("Not run: the user refused this tool call.")
    expect(alice.locator(".message.role-assistant").last).to_contain_text("I did not add them.")


def test_prov3_prov6_the_models_page_shows_health_and_sets_the_tool_policy(
    page: Any, server: Server, tools: dict[str, Any]
) -> None:
    admin = tools["admin"]
    wait = admin.get(f"/api/v1/mcp-servers/{tools['stuck']}").json()
    assert wait["health"]["state"] in ("connecting", "failed")
    sign_in(page, server, "tooladmin")
    page.goto(server.url + "/profiles")
    section = page.get_by_role("region", name="Tool servers (MCP)")
    working = section.locator(f'li[data-id="{tools["working"]}"]')
    stuck = section.locator(f'li[data-id="{tools["stuck"]}"]')
    expect(working.locator(".mcp-state")).to_have_text("Ready")
    expect(working.locator(".mcp-health")).to_contain_text("tools · last success:")
    # The hung server fails its 0.5 s connect timeout; Refresh shows it.
    for _ in range(50):
        section.get_by_role("button", name="Refresh").click()
        if stuck.locator(".mcp-state").text_content() == "Failed":
            break
        page.wait_for_timeout(100)
    expect(stuck.locator(".mcp-state")).to_have_text("Failed")
    expect(stuck.locator(".mcp-error")).to_contain_text("no answer within 0.5 s (connect timeout)")
    # Tools: stop offering echo, ask first for slow as well.
    working.locator("summary", has_text="Tools").click()
    working.get_by_role("checkbox", name="Offer echo").uncheck()
    working.get_by_role("checkbox", name="Ask first before slow").check()
    expect(working.get_by_role("checkbox", name="Ask first before add")).to_be_checked()
    working.get_by_role("button", name="Save tools").click()
    expect(working.get_by_role("status")).to_have_text("Saved")
    saved = admin.get(f"/api/v1/mcp-servers/{tools['working']}").json()
    assert "echo" not in saved["allowed_tools"] and {"add", "slow"} <= set(saved["allowed_tools"])
    assert saved["ask_first_tools"] == ["add", "slow"]
    admin.patch(
        f"/api/v1/mcp-servers/{tools['working']}",
        json={"allowed_tools": None, "ask_first_tools": ["add"]},
    )
