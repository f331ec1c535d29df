"""Quality: phone width, the system's dark preference, keyboard use with visible focus, the
evicted-conversations counter when a quota applies (STORE-4), and the README screenshots."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import expect
from tests.support.model_server import FakeModelServer
from tests.ui.conftest import sign_in
from tests.ui.harness import (
    Server,
    make_conversation,
    make_profile,
    save_screenshot,
    start_server,
)

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """This module's server keeps at most 5 conversations per user (STORE-4)."""
    srv = start_server(tmp_path_factory.mktemp("ui-quota") / "state", CHATMEM_MAX_CONVERSATIONS="5")
    try:
        srv.add_user("alice")
        yield srv
    finally:
        srv.stop()


@pytest.fixture(scope="module")
def chat(server: Server, model: FakeModelServer) -> dict[str, Any]:
    with server.api("alice") as api:
        profile = make_profile(api, model.base_url, "GPT fake", context_window=128000)
        c = make_conversation(api, profile["id"], pairs=3, title="Trip planning", pinned=True)
        path = f"/api/v1/conversations/{c['id']}/messages"
        first = api.get(path).json()["items"][0]["id"]
        api.put(f"{path}/{first}/exclusion").raise_for_status()  # the first pair leaves the memory
        return c


def test_store4_evicted_conversations_are_counted_and_shown(
    alice: Any, server: Server, model: FakeModelServer, chat: Any
) -> None:
    """Pinned 'Trip planning' + 7 more under a quota of 5: the 3 oldest unpinned go."""
    with server.api("alice") as api:
        profile = make_profile(api, model.base_url, "Quota model")
        for i in range(7):
            make_conversation(api, profile["id"], title=f"Quota chat {i}")
    alice.reload()
    expect(alice.locator("#evicted-notice")).to_have_text(
        "3 conversations were removed to stay within the storage quota."
    )


def test_phone_width_dark_mode_and_the_chat_screenshot(
    browser: Any, server: Server, chat: Any, console: Any
) -> None:
    context = browser.new_context(
        viewport={"width": 390, "height": 800}, color_scheme="dark", is_mobile=True, has_touch=True
    )
    page = context.new_page()
    console.attach(page)
    try:
        sign_in(page, server)
        page.goto(server.url + "/c/" + chat["id"])
        expect(page.locator("#chat-title")).to_have_text("Trip planning")
        # The list is a drawer on a phone.
        expect(page.locator("#sidebar")).not_to_be_in_viewport()
        page.get_by_role("button", name="Show chats").click()
        expect(page.locator("#sidebar")).to_be_in_viewport()
        page.get_by_role("button", name="Close the list").click()
        # Nothing overflows sideways.
        assert page.evaluate("document.documentElement.scrollWidth") <= 390
        background = page.evaluate("getComputedStyle(document.body).backgroundColor")
        assert background == "rgb(22, 24, 29)", background  # the dark palette
        expect(page.locator("#counter")).to_be_visible()
        save_screenshot(page, "phone-dark.png")
    finally:
        context.close()
    assert console.unexpected() == [], "console errors in the page"


def test_keyboard_only_use_with_visible_focus(alice: Any, server: Server, chat: Any) -> None:
    alice.goto(server.url + "/c/" + chat["id"])
    expect(alice.locator("#chat-title")).to_have_text("Trip planning")
    alice.keyboard.press("Tab")
    expect(alice.get_by_role("link", name="Skip to content")).to_be_focused()
    alice.keyboard.press("Enter")
    # Tab until the counter, open the memory window with the keyboard, close with Escape.
    for _ in range(60):
        if alice.evaluate("document.activeElement && document.activeElement.id") == "counter":
            break
        alice.keyboard.press("Tab")
    expect(alice.locator("#counter")).to_be_focused()
    outline = alice.evaluate("getComputedStyle(document.activeElement).outlineStyle")
    assert outline == "solid", "focus is visible"
    alice.keyboard.press("Enter")
    expect(alice.get_by_role("dialog")).to_be_visible()
    alice.keyboard.press("Escape")
    expect(alice.get_by_role("dialog")).to_be_hidden()


def test_readme_chat_screenshot_shows_the_counter_and_dimmed_pair(
    alice: Any, server: Server, chat: Any
) -> None:
    alice.set_viewport_size({"width": 1280, "height": 760})
    alice.goto(server.url + "/c/" + chat["id"])
    expect(alice.locator("#messages > .message.dimmed")).to_have_count(2)
    alice.get_by_role("textbox", name="Message").fill("So which day do we fly?")
    expect(alice.locator("#counter-text")).to_contain_text(" / 128K")
    expect(alice.locator("#counter")).to_have_class("counter level-muted")
    alice.wait_for_timeout(400)  # the debounced counter settles on the draft
    save_screenshot(alice, "chat.png", readme=True)
