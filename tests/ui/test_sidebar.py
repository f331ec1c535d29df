"""The conversation list: pinned first, folders, search over titles and content, paging.
(STORE-2, STORE-7)"""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect
from tests.ui.harness import Server

MANY = 130  # more than two pages of 50

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def many(server: Server) -> dict[str, str]:
    """MANY conversations for alice; one holds the word 'zanzibar' in a message."""
    ids: dict[str, str] = {}
    with server.api("alice") as api:
        for i in range(MANY):
            c = api.post("/api/v1/conversations", json={"title": f"Chat number {i:03d}"}).json()
            ids[c["title"]] = c["id"]
        api.post(
            f"/api/v1/conversations/{ids['Chat number 007']}/messages",
            json={"role": "user", "content": "Plans for the zanzibar trip"},
        ).raise_for_status()
        api.patch(
            f"/api/v1/conversations/{ids['Chat number 003']}", json={"pinned": True}
        ).raise_for_status()
    return ids


def test_pinned_conversation_comes_first_and_paging_loads_everything(
    alice: Any, many: dict[str, str]
) -> None:
    items = alice.locator("#conversation-list > li")
    expect(items.first).to_contain_text("Chat number 003")
    expect(items.first).to_have_class("pinned")
    # Only a page is fetched at first; scrolling the list fetches the rest.
    assert items.count() < MANY
    for _ in range(10):
        if items.count() >= MANY:
            break
        alice.locator("#list-sentinel").scroll_into_view_if_needed()
        alice.wait_for_timeout(300)
    expect(items).to_have_count(MANY)
    titles = items.locator(".title").all_inner_texts()
    assert len(set(titles)) == MANY


def test_search_finds_titles_and_message_content(
    alice: Any, server: Server, many: dict[str, str]
) -> None:
    alice.get_by_placeholder("Search chats").fill("zanzibar")
    items = alice.locator("#conversation-list > li")
    expect(items).to_have_count(1)
    expect(items.first).to_contain_text("Chat number 007")
    assert "q=zanzibar" in alice.url
    alice.get_by_placeholder("Search chats").fill("number 12")
    expect(items.first).to_contain_text("Chat number 12")
    alice.get_by_placeholder("Search chats").fill("no such words anywhere")
    expect(alice.locator("#list-empty")).to_have_text("No chats match.")
    alice.get_by_placeholder("Search chats").fill("")
    expect(items.first).to_contain_text("Chat number 003")


def test_folders_filter_the_list_and_a_chat_can_be_moved(
    alice: Any, server: Server, many: dict[str, str]
) -> None:
    alice.once("dialog", lambda d: d.accept("Work"))
    alice.get_by_role("button", name="New folder").click()
    folder_button = alice.get_by_role("button", name="Work", exact=True)
    expect(folder_button).to_be_visible()
    # Move a conversation into the folder from its header.
    alice.goto(server.url + "/c/" + many["Chat number 042"])
    expect(alice.locator("#chat-title")).to_have_text("Chat number 042")
    with alice.expect_response(lambda r: r.request.method == "PATCH"):
        alice.get_by_label("Folder", exact=True).select_option(label="Work")
    folder_button.click()
    expect(folder_button).to_have_attribute("aria-pressed", "true")
    items = alice.locator("#conversation-list > li")
    expect(items).to_have_count(1)
    expect(items.first).to_contain_text("Chat number 042")
    alice.get_by_role("button", name="All chats").click()
    expect(items.first).to_contain_text("Chat number 003")


def test_opening_a_conversation_marks_it_current(
    alice: Any, many: dict[str, str], server: Server
) -> None:
    alice.goto(server.url + "/c/" + many["Chat number 010"])
    expect(alice.locator("#chat-title")).to_have_text("Chat number 010")
    expect(alice.locator("#conversation-list a[aria-current=page]")).to_have_count(
        0
    )  # beyond page 1
    alice.get_by_placeholder("Search chats").fill("number 010")
    expect(alice.locator("#conversation-list a[aria-current=page]")).to_have_text("Chat number 010")
