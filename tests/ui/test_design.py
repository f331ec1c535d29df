"""Issue 32, the design pass: the theme follows the system and the user's choice overrides it
(light or dark, kept on the server), with no serious or critical axe violation in either;
a streamed answer shows typing dots first, Stop stands in Send's place, auto-scroll stops
when the reader scrolls up and stays stopped when the answer ends, "Jump to latest" brings
them back; the keyboard shortcuts and their dialog; the first run says what to do."""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import expect
from tests.support.model_server import FakeModelServer
from tests.ui.conftest import sign_in
from tests.ui.harness import (
    THEME_CASES,
    THEME_IDS,
    ConsoleErrors,
    Server,
    axe_violations,
    make_conversation,
    make_profile,
    open_chat,
    opened_page,
)

pytestmark = pytest.mark.browser

DESKTOP = {"width": 1280, "height": 860}
_BACKGROUND_LUMINANCE = """() => {
  const [r, g, b] = getComputedStyle(document.body).backgroundColor.match(/\\d+/g).map(Number);
  const lin = (c) => { c /= 255; return c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4; };
  return 0.2126 * lin(r) + 0.7152 * lin(g) + 0.0722 * lin(b);
}"""


@pytest.fixture(scope="module")
def profile(server: Server, model: FakeModelServer) -> dict[str, Any]:
    with server.api("alice") as api:
        return make_profile(api, model.base_url, "Fake model", context_window=16384)


@pytest.fixture(scope="module")
def chat(server: Server, profile: dict[str, Any]) -> dict[str, Any]:
    """A conversation long enough to scroll, ending in an answer with a table and code."""
    with server.api("alice") as api:
        c = make_conversation(api, profile["id"], pairs=12, title="Design pass")
        for role, text in (
            ("user", "Show me a table and some code"),
            ("assistant", "| a | b |\n|---|---|\n| 1 | 2 |\n\n```python\nprint('hi')\n```"),
        ):
            r = api.post(
                f"/api/v1/conversations/{c['id']}/messages", json={"role": role, "content": text}
            )
            assert r.status_code == 201, r.text
        return dict(c)


def opened(browser: Any, console: ConsoleErrors, session: Any, scheme: str) -> Any:
    return opened_page(browser, console, session, viewport=DESKTOP, color_scheme=scheme)


def _luminance(page: Any) -> float:
    return float(page.evaluate(_BACKGROUND_LUMINANCE))


def _set_theme(server: Server, theme: str) -> None:
    with server.api("alice") as api:
        assert api.patch("/api/v1/me", json={"theme": theme}).status_code == 200


def test_the_theme_follows_the_system_and_the_setting_overrides_it(
    browser: Any, console: ConsoleErrors, server: Server, alice_session: Any, chat: Any
) -> None:
    _set_theme(server, "system")
    seen: dict[str, float] = {}
    try:
        for scheme in ("light", "dark"):
            with opened(browser, console, alice_session, scheme) as page:
                open_chat(page, server, chat)
                seen[scheme] = _luminance(page)
        assert seen["light"] > 0.8 and seen["dark"] < 0.05, seen
        # In a light system, the user picks Dark beside the language: at once, and kept.
        with opened(browser, console, alice_session, "light") as page:
            open_chat(page, server, chat)
            picker = page.get_by_label("Theme", exact=True)
            expect(picker).to_have_value("system")
            with page.expect_response(lambda r: r.request.method == "PATCH"):
                picker.select_option(label="Dark")
            assert _luminance(page) < 0.05
            page.reload()
            expect(page.locator("html")).to_have_attribute("data-theme", "dark")
            expect(page.get_by_label("Theme", exact=True)).to_have_value("dark")
            assert _luminance(page) < 0.05
        # In a dark system the setting Light wins; System gives the system back.
        _set_theme(server, "light")
        with opened(browser, console, alice_session, "dark") as page:
            open_chat(page, server, chat)
            assert _luminance(page) > 0.8
            with page.expect_response(lambda r: r.request.method == "PATCH"):
                page.get_by_label("Theme", exact=True).select_option(label="System theme")
            expect(page.locator("html")).not_to_have_attribute("data-theme", re.compile(".*"))
            assert _luminance(page) < 0.05
        with server.api("alice") as api:
            assert api.get("/api/v1/me").json()["theme"] == "system"
    finally:
        _set_theme(server, "system")


@pytest.mark.parametrize(("scheme", "theme"), THEME_CASES, ids=THEME_IDS)
def test_axe_finds_no_serious_violation_in_either_theme(
    browser: Any,
    console: ConsoleErrors,
    server: Server,
    alice_session: Any,
    chat: Any,
    scheme: str,
    theme: str,
) -> None:
    found: dict[str, list[str]] = {}
    if theme == "system":
        with opened(browser, console, None, scheme) as page:
            page.goto(server.url + "/")
            expect(page.get_by_role("button", name="Sign in")).to_be_visible()
            found["sign-in"] = axe_violations(page)
    _set_theme(server, theme)
    try:
        with opened(browser, console, alice_session, scheme) as page:
            open_chat(page, server, chat)
            found["chat"] = axe_violations(page)
            page.locator("#chat-title").click()
            page.keyboard.press("?")
            expect(page.get_by_role("dialog", name="Keyboard shortcuts")).to_be_visible()
            found["shortcuts"] = axe_violations(page)
            page.keyboard.press("Escape")
            page.get_by_role("button", name="Chat actions").click()
            expect(page.get_by_role("button", name="Delete")).to_be_visible()
            found["chat menu"] = axe_violations(page)
            page.get_by_role("button", name="Delete").click()
            expect(page.get_by_role("alertdialog", name="Delete this chat?")).to_be_visible()
            found["confirm"] = axe_violations(page)
            page.get_by_role("button", name="Cancel").click()
    finally:
        _set_theme(server, "system")
    assert {name: v for name, v in found.items() if v} == {}


def _feed_gap(page: Any) -> float:
    """How far the feed is from its end, in pixels."""
    return float(
        page.evaluate(
            "() => { const f = document.getElementById('feed');"
            " return f.scrollHeight - f.scrollTop - f.clientHeight; }"
        )
    )


def test_auto_scroll_stops_when_the_reader_scrolls_up_and_jump_brings_them_back(
    alice: Any, server: Server, model: FakeModelServer, chat: Any
) -> None:
    open_chat(alice, server, chat)
    assert _feed_gap(alice) < 2  # opened at the end
    lines = [f"Line {i} of a long answer that grows the feed.\n\n" for i in range(50)]
    model.reply("".join(lines), chunks=lines, delay=0.08)
    alice.get_by_role("textbox", name="Message").fill("Tell me a long story")
    alice.get_by_role("button", name="Send").click()
    live = alice.locator(".message.streaming")
    expect(live).to_contain_text("Line 3 ")
    # Stop stands where Send stood while the turn runs.
    expect(alice.get_by_role("button", name="Send")).to_be_hidden()
    expect(alice.get_by_role("button", name="Stop")).to_be_visible()
    assert _feed_gap(alice) < 40  # following the answer so far
    jump = alice.get_by_role("button", name="Jump to latest")
    expect(jump).to_be_hidden()
    # The reader scrolls up to read: the feed stops following.
    alice.locator("#feed").hover()
    alice.mouse.wheel(0, -600)
    expect(jump).to_be_visible()
    top = alice.evaluate("document.getElementById('feed').scrollTop")
    expect(live).to_contain_text("Line 20 ")
    assert alice.evaluate("document.getElementById('feed').scrollTop") == top
    # The answer ends, the feed is drawn again: the reader is still where they were.
    expect(alice.get_by_role("button", name="Send")).to_be_visible(timeout=20_000)
    answer = alice.locator(".message.role-assistant").last
    expect(answer).to_contain_text("Line 49 ")
    expect(alice.locator(".message.streaming")).to_have_count(0)
    alice.wait_for_function("() => !document.querySelector('#messages .message[data-id=\"\"]')")
    assert abs(alice.evaluate("document.getElementById('feed').scrollTop") - top) < 2
    assert _feed_gap(alice) > 300
    expect(jump).to_be_visible()
    jump.click()
    alice.wait_for_function(
        "() => { const f = document.getElementById('feed');"
        " return f.scrollHeight - f.scrollTop - f.clientHeight < 2; }"
    )
    expect(jump).to_be_hidden()
    expect(alice.get_by_role("textbox", name="Message")).to_be_focused()


def test_typing_dots_until_the_first_token_and_esc_stops_the_turn(
    alice: Any, server: Server, model: FakeModelServer, chat: Any
) -> None:
    open_chat(alice, server, chat)
    model.hang(30)
    draft = alice.get_by_role("textbox", name="Message")
    draft.fill("Are you there?")
    draft.press("Enter")
    typing = alice.locator(".message.streaming .typing")
    expect(typing).to_be_visible()
    expect(typing).to_have_attribute("role", "status")
    expect(typing).to_have_text("Answering…")
    expect(typing.locator(".typing-dots i")).to_have_count(3)
    stop = alice.get_by_role("button", name="Stop")
    expect(stop).to_be_visible()
    expect(draft).to_be_focused()
    with alice.expect_request(lambda r: r.method == "POST" and r.url.endswith("/stop")):
        alice.keyboard.press("Escape")
    expect(alice.get_by_role("button", name="Send")).to_be_visible(timeout=20_000)
    expect(stop).to_be_hidden()
    expect(alice.locator(".typing")).to_have_count(0)


def test_the_shortcuts_and_their_dialog(
    alice: Any, server: Server, model: FakeModelServer, chat: Any
) -> None:
    open_chat(alice, server, chat)
    draft = alice.get_by_role("textbox", name="Message")
    # "?" while typing is a question mark; elsewhere it opens the list.
    draft.focus()
    alice.keyboard.press("?")
    expect(draft).to_have_value("?")
    expect(alice.locator("#shortcuts-dialog")).to_be_hidden()
    draft.fill("")
    alice.locator("#chat-title").click()
    alice.keyboard.press("?")
    dialog = alice.get_by_role("dialog", name="Keyboard shortcuts")
    expect(dialog).to_be_visible()
    for name in ("New chat", "Search chats", "Write a message", "Stop the answer"):
        expect(dialog.get_by_role("rowheader", name=name)).to_be_visible()
    expect(dialog.get_by_role("row", name=re.compile("Open the memory window"))).to_contain_text(
        "Ctrl+Shift+M"
    )
    expect(dialog.get_by_role("button", name="Close")).to_be_focused()
    alice.keyboard.press("Escape")
    expect(dialog).to_be_hidden()
    # From the top bar's menu too; the close button closes it and gives the focus back.
    opener = alice.get_by_role("button", name="Keyboard shortcuts")
    opener.click()
    expect(dialog).to_be_visible()
    dialog.get_by_role("button", name="Close").click()
    expect(dialog).to_be_hidden()
    expect(opener).to_be_focused()

    alice.keyboard.press("Control+k")
    expect(alice.get_by_role("searchbox", name="Search chats")).to_be_focused()
    alice.keyboard.press("Shift+Escape")
    expect(draft).to_be_focused()
    alice.keyboard.press("Control+Shift+M")
    memory = alice.locator("#memory-window")
    expect(memory).to_be_visible()
    alice.keyboard.press("Escape")
    expect(memory).to_be_hidden()
    alice.keyboard.press("Control+Shift+O")
    alice.wait_for_url(server.url + "/")
    expect(alice.locator("#chat-title")).not_to_have_text(chat["title"])


def test_the_first_run_says_what_to_do_then_the_empty_chat_invites(
    browser: Any, console: ConsoleErrors, server: Server, model: FakeModelServer
) -> None:
    server.add_user("bea")
    with opened(browser, console, None, "light") as page:
        sign_in(page, server, "bea")
        first = page.locator("#first-run")
        expect(first).to_be_visible()
        expect(first.get_by_role("heading", name="Welcome to chatmem")).to_be_visible()
        expect(page.locator("#chat-error")).to_be_hidden()
        expect(page.locator("#empty-chat")).to_be_hidden()
        # Import: the sidebar's file chooser (it takes ChatGPT and Claude exports).
        with page.expect_file_chooser() as chooser:
            first.get_by_role("button", name="Import a ChatGPT or Claude export").click()
        assert chooser.value.element.get_attribute("id") == "import-file"
        first.get_by_role("link", name="Add a model profile").click()
        page.wait_for_url(server.url + "/profiles")
        with server.api("bea") as api:
            make_profile(api, model.base_url, "Bea's model")
        page.goto(server.url + "/")
        expect(page.locator("#empty-chat")).to_be_visible()
        expect(page.get_by_role("heading", name="What shall we talk about?")).to_be_visible()
        expect(first).to_be_hidden()
