"""Phone and keyboard: at 390×844 the chat's top is one line (the chat tools and the main
links fold behind menu buttons) and the model and memory selectors sit side by side; the
menus work from the keyboard with a visible focus; axe-core finds no serious or critical
violation on the sign-in, chat, memory window, profiles and archive pages."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import expect
from tests.support.model_server import FakeModelServer
from tests.ui.harness import (
    ConsoleErrors,
    Server,
    axe_violations,
    make_conversation,
    make_profile,
    opened_page,
    save_screenshot,
    tab_to,
)

pytestmark = pytest.mark.browser

PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1280, "height": 860}


@pytest.fixture(scope="module")
def chat(server: Server, model: FakeModelServer) -> dict[str, Any]:
    """A chat with three pairs, the first excluded, and a Markdown answer with code."""
    with server.api("alice") as api:
        profile = make_profile(api, model.base_url, "Fake model", context_window=16384)
        c = make_conversation(
            api, profile["id"], pairs=2, title="A long conversation title for a phone screen"
        )
        for role, text in (
            ("user", "Show me a table and some code"),
            (
                "assistant",
                "| a | b |\n|---|---|\n| 1 | 2 |\n\n```python\nprint('hi')  # "
                + "a long line that scrolls sideways on a phone " * 4
                + "\n```",
            ),
        ):
            r = api.post(
                f"/api/v1/conversations/{c['id']}/messages", json={"role": role, "content": text}
            )
            assert r.status_code == 201, r.text
        first = api.get(f"/api/v1/conversations/{c['id']}/messages").json()["items"][0]
        r = api.put(f"/api/v1/conversations/{c['id']}/messages/{first['id']}/exclusion")
        assert r.status_code in (200, 204), r.text
        return dict(c)


def opened(
    browser: Any, console: ConsoleErrors, session: Any, viewport: dict[str, int], scheme: str
) -> Any:
    return opened_page(browser, console, session, viewport=viewport, color_scheme=scheme)


@pytest.fixture
def phone(browser: Any, console: ConsoleErrors, alice_session: Any) -> Iterator[Any]:
    with opened(browser, console, alice_session, PHONE, "light") as page:
        yield page


def open_chat(page: Any, server: Server, chat: dict[str, Any]) -> None:
    page.goto(server.url + "/c/" + chat["id"])
    expect(page.locator("#chat-title")).to_have_text(chat["title"])
    expect(page.locator("#messages > .message")).to_have_count(6)


def test_phone_chat_top_is_one_line_and_the_selectors_sit_side_by_side(
    phone: Any, server: Server, chat: Any
) -> None:
    open_chat(phone, server, chat)
    header = phone.locator("#chat-header").bounding_box()
    line = [
        phone.get_by_role("button", name="Show chats"),
        phone.locator("#chat-title"),
        phone.get_by_role("button", name="Chat actions"),
        phone.get_by_role("button", name="Menu"),
    ]
    boxes = [item.bounding_box() for item in line]
    for box in boxes:
        assert box is not None
        middle = box["y"] + box["height"] / 2
        assert header["y"] <= middle <= header["y"] + header["height"], (box, header)
        assert box["x"] >= 0 and box["x"] + box["width"] <= PHONE["width"]
    # The title, the chat's menu and the main menu do not overlap.
    assert boxes[1]["x"] + boxes[1]["width"] <= boxes[2]["x"] + 1
    assert boxes[2]["x"] + boxes[2]["width"] <= boxes[3]["x"] + 1
    # One line: everything above the messages takes under 7 % of the height (was 22 %).
    assert header["y"] + header["height"] <= 0.07 * PHONE["height"], header
    # The chat tools are in the menu, not on screen.
    expect(phone.get_by_role("button", name="Rename")).to_be_hidden()
    model = phone.get_by_label("Model", exact=True).bounding_box()
    memory = phone.get_by_label("Memory mode", exact=True).bounding_box()
    assert abs(model["y"] - memory["y"]) < 4, (model, memory)
    assert model["x"] + model["width"] <= memory["x"]
    assert memory["x"] + memory["width"] <= PHONE["width"]
    assert phone.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    save_screenshot(phone, "phone-chat.png", readme=True)


def _focus_ring(page: Any) -> str:
    return str(page.evaluate("getComputedStyle(document.activeElement).outlineStyle"))


def test_tab_reaches_the_menus_and_every_item_with_a_visible_focus(
    phone: Any, server: Server, chat: Any
) -> None:
    open_chat(phone, server, chat)
    tools = phone.get_by_role("button", name="Chat actions")
    tab_to(phone, tools)
    assert _focus_ring(phone) == "solid"
    expect(tools).to_have_attribute("aria-expanded", "false")
    phone.keyboard.press("Enter")
    expect(tools).to_have_attribute("aria-expanded", "true")
    # Tab walks every item of the menu in order, each visible with its focus ring.
    panel = phone.locator("#chat-tools")
    items = panel.locator("a[href], button, select")
    names = []
    for i in range(items.count()):
        if i:
            phone.keyboard.press("Tab")
        expect(items.nth(i)).to_be_focused()
        expect(items.nth(i)).to_be_visible()
        assert _focus_ring(phone) == "solid", i
        names.append(
            items.nth(i).evaluate(
                "n => n.labels && n.labels.length ? n.labels[0].textContent : n.textContent"
            )
        )
    for name in ("Rename", "Pin", "Folder", "Export", "Archive", "Delete"):
        assert name in names, names
    phone.keyboard.press("Escape")
    expect(tools).to_have_attribute("aria-expanded", "false")
    expect(tools).to_be_focused()
    expect(panel.get_by_text("Rename", exact=True)).to_be_hidden()
    # An item works from the keyboard and closes the menu.
    phone.keyboard.press("Enter")
    phone.keyboard.press("Tab")
    with phone.expect_response(lambda r: r.request.method == "PATCH"):
        phone.keyboard.press("Enter")
    expect(tools).to_have_attribute("aria-expanded", "false")
    expect(panel.locator("#pin-chat")).to_have_text("Unpin")
    expect(panel.locator("#pin-chat")).to_have_attribute("aria-pressed", "true")
    with server.api("alice") as api:
        api.patch(f"/api/v1/conversations/{chat['id']}", json={"pinned": False})

    main_menu = phone.get_by_role("button", name="Menu")
    tab_to(phone, main_menu)
    phone.keyboard.press("Enter")
    nav = phone.get_by_role("navigation", name="Main")
    expect(nav.get_by_role("link", name="Chats")).to_be_focused()
    phone.keyboard.press("Tab")
    expect(nav.get_by_role("link", name="Models")).to_be_focused()
    assert _focus_ring(phone) == "solid"
    phone.keyboard.press("Escape")
    expect(main_menu).to_be_focused()
    expect(nav).to_be_hidden()


@pytest.mark.parametrize(
    ("viewport", "scheme"),
    [(DESKTOP, "light"), (PHONE, "dark")],
    ids=["desktop-light", "phone-dark"],
)
def test_axe_finds_no_serious_or_critical_violation(
    browser: Any,
    console: ConsoleErrors,
    server: Server,
    alice_session: Any,
    chat: Any,
    viewport: dict[str, int],
    scheme: str,
) -> None:
    with server.api("alice") as api:
        archived = make_conversation(api, chat["profile_id"], pairs=1, title="Old trip")
        assert api.post(f"/api/v1/conversations/{archived['id']}/archive").status_code in (200, 204)
    found: dict[str, list[str]] = {}
    with opened(browser, console, None, viewport, scheme) as page:
        page.goto(server.url + "/")
        expect(page.get_by_role("button", name="Sign in")).to_be_visible()
        found["sign-in"] = axe_violations(page)
    with opened(browser, console, alice_session, viewport, scheme) as page:
        open_chat(page, server, chat)
        expect(page.locator("#counter-text")).not_to_have_text("–")
        found["chat"] = axe_violations(page)
        page.locator("#counter").click()
        expect(page.get_by_role("dialog")).to_be_visible()
        expect(page.locator("#mw-used")).not_to_be_empty()
        found["memory window"] = axe_violations(page)
        page.keyboard.press("Escape")
        page.goto(server.url + "/profiles")
        expect(page.locator("#profile-list li").first).to_be_visible()
        found["profiles"] = axe_violations(page)
        page.goto(server.url + "/archive")
        page.get_by_role("link", name="Old trip").first.click()
        expect(page.locator("#archive-view")).to_be_visible()
        found["archive"] = axe_violations(page)
    assert {name: v for name, v in found.items() if v} == {}
