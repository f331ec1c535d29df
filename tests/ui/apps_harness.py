"""Helpers of the MCP Apps browser tests (issue 28): the test server with apps registered by an
administrator, a question that makes the model call a tool, and the app's frames.

An app is two frames deep: the feed's ``.app-frame`` is chatmem's sandbox proxy
(``/apps/sandbox``), its one ``iframe`` the app itself.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from playwright.sync_api import expect
from tests.support.mcp_server import wait_until_ready
from tests.support.model_server import FakeModelServer
from tests.ui.harness import Server

#: What the browser logs when an app's own frame breaks its policy (the tests' probes do).
APP_CSP_NOISE = r"Content Security Policy|Fetch API cannot load|violates the following"


@contextlib.contextmanager
def registered(
    server: Server, admin: str, url: str, name: str = "weather", **fields: Any
) -> Iterator[str]:
    """An MCP server registered by ``admin`` (and ready); removed afterwards."""
    with server.api(admin) as api:
        created = api.post("/api/v1/mcp-servers", json={"name": name, "url": url, **fields})
        assert created.status_code == 201, created.text
        server_id = str(created.json()["id"])
        wait_until_ready(api.get, server_id)
        try:
            yield server_id
        finally:
            api.delete(f"/api/v1/mcp-servers/{server_id}")


def ask(page: Any, text: str) -> None:
    box = page.get_by_role("textbox", name="Message")
    box.fill(text)
    box.press("Enter")


def ask_for_tool(
    page: Any, model: FakeModelServer, tool: str, arguments: dict[str, Any], answer: str
) -> None:
    """A question whose answer calls ``tool`` once, then says ``answer``."""
    model.tool_call(tool, arguments, id=f"call_{tool}_{abs(hash(answer)) % 10_000}")
    model.reply(answer)
    ask(page, f"Please use {tool}.")
    expect(page.locator(".message.role-assistant").last).to_contain_text(answer)
    expect(page.get_by_role("button", name="Send")).to_be_visible()


def app_view(page: Any, index: int = -1) -> Any:
    views = page.locator(".app-view")
    return views.last if index == -1 else views.nth(index)


def app_frame(view: Any) -> Any:
    """The app's own document (inside the sandbox proxy)."""
    return view.frame_locator(".app-frame").frame_locator("iframe")


def started(view: Any) -> Any:
    """The test app's frame, once it says it initialised."""
    frame = app_frame(view)
    expect(frame.locator("#state")).to_have_text("initialized")
    return frame


def log_lines(frame: Any) -> list[str]:
    return [str(line) for line in frame.locator("#log > div").all_text_contents()]
