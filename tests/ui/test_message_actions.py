"""Issue 32, actions where hands expect them: a message's actions are icon buttons with names
and tooltips, shown on hover and focus, reached by Tab, always shown on a touch screen; Copy
copies every message as it was written; the chat's actions are one menu and Delete asks
first; the summary's boundary is a divider across the feed."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect
from tests.support.model_server import FakeModelServer
from tests.ui.harness import (
    ConsoleErrors,
    Server,
    make_conversation,
    make_profile,
    open_chat,
    opened_page,
    tab_to,
)

pytestmark = pytest.mark.browser

DESKTOP = {"width": 1280, "height": 860}
ANSWER = "## Plan\n\n- **one** step\n- `two` steps\n"


@pytest.fixture(scope="module")
def profile(server: Server, model: FakeModelServer) -> dict[str, Any]:
    with server.api("alice") as api:
        return make_profile(api, model.base_url, "Fake model", context_window=16384)


def _chat(server: Server, profile: dict[str, Any], title: str, pairs: int = 3) -> dict[str, Any]:
    with server.api("alice") as api:
        c = make_conversation(api, profile["id"], pairs=pairs, title=title)
        for role, text in (("user", "Line one\nline two"), ("assistant", ANSWER)):
            r = api.post(
                f"/api/v1/conversations/{c['id']}/messages", json={"role": role, "content": text}
            )
            assert r.status_code == 201, r.text
        return dict(c)


def opened(browser: Any, console: ConsoleErrors, session: Any, **options: Any) -> Any:
    return opened_page(browser, console, session, viewport=DESKTOP, **options)


def _opacity(locator: Any) -> float:
    return float(locator.evaluate("n => getComputedStyle(n).opacity"))


def test_message_actions_show_on_hover_and_focus_and_have_names_and_tooltips(
    browser: Any, console: ConsoleErrors, server: Server, alice_session: Any, profile: Any
) -> None:
    chat = _chat(server, profile, "Hover and Tab")
    with opened(browser, console, alice_session) as page:
        open_chat(page, server, chat)
        first = page.locator("#messages > .message").first
        actions = first.locator(".message-actions")
        page.mouse.move(0, 0)
        expect(actions).to_have_css("opacity", "0")
        # Hidden by opacity only: still in place (nothing moves when they show) and reachable.
        size = "n => [n.offsetWidth, n.offsetHeight]"
        size_before = first.evaluate(size)
        first.hover()
        expect(actions).to_have_css("opacity", "1")
        assert first.evaluate(size) == size_before
        copy = first.get_by_role("button", name="Copy message")
        expect(copy).to_have_attribute("title", "Copy message")
        exclude = first.get_by_role("button", name="Exclude from memory")
        expect(exclude).to_have_attribute("title", "Exclude from memory")
        # Each icon is drawn (a mask over the text colour), not an empty box.
        mask = copy.locator(".glyph").evaluate(
            "n => getComputedStyle(n).webkitMaskImage || getComputedStyle(n).maskImage"
        )
        assert "icons/copy.svg" in mask
        # By keyboard: Tab from the top of the page reaches the first message's actions, which
        # show while focus is in them.
        page.mouse.move(0, 0)
        expect(actions).to_have_css("opacity", "0")
        page.locator("#chat-title").click()
        tab_to(page, copy)
        expect(actions).to_have_css("opacity", "1")
        page.keyboard.press("Tab")
        expect(exclude).to_be_focused()
        with page.expect_response(lambda r: "/exclusion" in r.url):
            page.keyboard.press("Enter")
        expect(first.get_by_role("button", name="Include in memory")).to_be_visible()
        expect(first).to_have_attribute("data-status", "excluded")
        # The last message's actions are always shown: the answer just read.
        last = page.locator("#messages > .message").last
        page.mouse.move(0, 0)
        expect(last.locator(".message-actions")).to_have_css("opacity", "1")
        expect(last.get_by_role("button", name="Regenerate")).to_be_visible()


def test_on_a_touch_screen_the_actions_are_always_shown(
    browser: Any, console: ConsoleErrors, server: Server, alice_session: Any, profile: Any
) -> None:
    chat = _chat(server, profile, "Touch")
    with opened(browser, console, alice_session, has_touch=True, is_mobile=True) as page:
        open_chat(page, server, chat)
        assert page.evaluate("matchMedia('(hover: none)').matches")
        for i in range(page.locator("#messages > .message").count()):
            actions = page.locator("#messages > .message").nth(i).locator(".message-actions")
            assert _opacity(actions) == 1.0, i


def test_copy_copies_every_message_as_it_was_written(
    browser: Any, console: ConsoleErrors, server: Server, alice_session: Any, profile: Any
) -> None:
    chat = _chat(server, profile, "Copy")
    with opened(browser, console, alice_session) as page:
        page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=server.url)
        open_chat(page, server, chat)
        answer = page.locator("#messages > .message.role-assistant").last
        answer.get_by_role("button", name="Copy message").click()
        expect(answer.get_by_role("button", name="Copied")).to_be_visible()
        assert page.evaluate("navigator.clipboard.readText()") == ANSWER  # the Markdown
        question = page.locator("#messages > .message.role-user").last
        question.get_by_role("button", name="Copy message").click()
        expect(question.get_by_role("button", name="Copied")).to_be_visible()
        assert page.evaluate("navigator.clipboard.readText()") == "Line one\nline two"
        # The name comes back.
        expect(answer.get_by_role("button", name="Copy message")).to_be_visible()


def test_the_chats_actions_are_one_menu_and_delete_asks_first(
    browser: Any, console: ConsoleErrors, server: Server, alice_session: Any, profile: Any
) -> None:
    chat = _chat(server, profile, "Menu and delete")
    with opened(browser, console, alice_session) as page:
        open_chat(page, server, chat)
        menu = page.get_by_role("button", name="Chat actions")
        for name in ("Rename", "Archive", "Delete"):
            expect(page.get_by_role("button", name=name, exact=True)).to_be_hidden()
        menu.click()
        for name in ("Rename", "Pin", "Archive", "Delete"):
            expect(page.get_by_role("button", name=name, exact=True)).to_be_visible()
        expect(page.get_by_role("link", name="Export", exact=True)).to_be_visible()
        expect(page.get_by_label("Folder", exact=True)).to_be_visible()
        expect(page.get_by_role("combobox", name="Project", exact=True)).to_be_visible()
        # Delete asks; Cancel (which has the focus) keeps the chat.
        page.get_by_role("button", name="Delete", exact=True).click()
        confirm = page.get_by_role("alertdialog", name="Delete this chat?")
        expect(confirm).to_be_visible()
        expect(confirm.get_by_role("button", name="Cancel")).to_be_focused()
        page.keyboard.press("Escape")
        expect(confirm).to_be_hidden()
        menu.click()
        page.get_by_role("button", name="Delete", exact=True).click()
        confirm.get_by_role("button", name="Cancel").click()
        expect(confirm).to_be_hidden()
        with server.api("alice") as api:
            assert api.get(f"/api/v1/conversations/{chat['id']}").status_code == 200
        # Confirmed, it is gone.
        menu.click()
        page.get_by_role("button", name="Delete", exact=True).click()
        with page.expect_response(lambda r: r.request.method == "DELETE"):
            confirm.get_by_role("button", name="Delete permanently").click()
        expect(page).to_have_url(server.url + "/")
    with server.api("alice") as api:
        assert api.get(f"/api/v1/conversations/{chat['id']}").status_code == 404


def test_the_summary_boundary_is_a_divider_between_summarised_and_verbatim(
    browser: Any,
    console: ConsoleErrors,
    server: Server,
    alice_session: Any,
    profile: Any,
    model: FakeModelServer,
) -> None:
    chat = _chat(server, profile, "Divider", pairs=4)
    with server.api("alice") as api:
        model.reply("Summary: topics 0 to 3 were discussed.")
        r = api.post(f"/api/v1/conversations/{chat['id']}/compact", json={})
        assert r.status_code in (200, 201, 202), r.text
    with opened(browser, console, alice_session) as page:
        open_chat(page, server, chat)
        marker = page.locator(".compaction-marker")
        expect(marker).to_be_visible()
        above = marker.locator("xpath=preceding-sibling::li[contains(@class,'message')][1]")
        below = marker.locator("xpath=following-sibling::li[contains(@class,'message')][1]")
        assert "dimmed" in (above.get_attribute("class") or "")
        assert "dimmed" not in (below.get_attribute("class") or "")
        # A rule across the feed on either side of its words.
        rules = marker.locator(".compaction-line").evaluate(
            """n => ['::before', '::after'].map((p) => {
                 const s = getComputedStyle(n, p);
                 return [s.content, s.borderTopStyle, parseFloat(s.width)];
               })"""
        )
        for content, style, width in rules:
            assert content == '""' and style == "solid" and width > 20, rules
        marker.get_by_role("button", name="Show summary").click()
        expect(marker.locator(".summary-text")).to_contain_text("topics 0 to 3")


def test_an_archived_chat_is_read_only_but_its_messages_copy(
    browser: Any, console: ConsoleErrors, server: Server, alice_session: Any, profile: Any
) -> None:
    chat = _chat(server, profile, "Archived copy", pairs=1)
    with server.api("alice") as api:
        assert api.post(f"/api/v1/conversations/{chat['id']}/archive").status_code in (200, 204)
    with opened(browser, console, alice_session) as page:
        page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=server.url)
        page.goto(server.url + "/archive/" + chat["id"])
        view = page.locator("#archive-view")
        expect(view.locator(".message")).to_have_count(4)
        answer = view.locator(".message.role-assistant").last
        answer.get_by_role("button", name="Copy message").click()
        expect(answer.get_by_role("button", name="Copied")).to_be_visible()
        assert page.evaluate("navigator.clipboard.readText()") == ANSWER
        # Copy is the only action there: nothing edits, excludes or regenerates.
        assert view.locator(".message-actions button").count() == 4
