"""Memory controls as the help pages describe them (seed 001): the block "Conversation
context" with its switch, mode and «?», the modes named as the pages name them in the panel
and in the memory window, the panel's "Conversation memory" button; and the hint "a new chat
may work better" once a compacted chat is past half its window (seed 004)."""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import expect
from tests.support.model_server import FakeModelServer
from tests.support.runs import finished_run
from tests.ui.harness import Server, make_conversation, open_chat, save_screenshot

pytestmark = pytest.mark.browser


def _patched(response: Any) -> bool:
    return response.request.method == "PATCH" and "/api/v1/conversations/" in response.url


def test_seed001_the_context_block_switches_memory_and_chooses_its_mode(
    alice: Any, server: Server, profiles: Any
) -> None:
    with server.api("alice") as api:
        c = make_conversation(api, profiles["paid"]["id"], pairs=2, title="Context block")
        open_chat(alice, server, c)
        block = alice.get_by_role("group", name="Conversation context")
        switch = block.get_by_role("switch", name="Conversation context")
        mode = block.get_by_label("Memory mode", exact=True)
        expect(switch).to_be_checked()
        expect(mode.locator("option")).to_have_text(["Economy", "Everything", "Recent messages"])
        expect(mode).to_have_value("full")
        # Off: the API's mode "off"; the mode beside the switch is kept for when it is back on.
        with alice.expect_response(_patched):
            switch.uncheck()
        assert api.get(f"/api/v1/conversations/{c['id']}").json()["mode"] == "off"
        expect(mode).to_be_disabled()
        expect(alice.locator("#messages > .message.dimmed")).to_have_count(4)
        with alice.expect_response(_patched):
            switch.check()
        assert api.get(f"/api/v1/conversations/{c['id']}").json()["mode"] == "full"
        with alice.expect_response(_patched):
            mode.select_option(label="Economy")
        assert api.get(f"/api/v1/conversations/{c['id']}").json()["mode"] == "economy"
    # The panel's button is the third way into the memory window, which names the mode as
    # the pages do there ("Economy memory", not the panel's "Economy").
    block.get_by_role("button", name="Conversation memory").click()
    dialog = alice.get_by_role("dialog", name="Conversation memory")
    expect(dialog).to_be_visible()
    expect(dialog.locator("#mw-mode")).to_have_text("Economy memory")
    # "Change" closes the window and lights up the block.
    dialog.get_by_role("link", name="Change").click()
    expect(dialog).to_be_hidden()
    expect(switch).to_be_focused()
    expect(alice.locator("#context-block")).to_have_class(re.compile(r"\bhighlight\b"))


def test_seed001_the_context_block_in_russian(
    browser: Any, server: Server, profiles: Any, alice_session: Any
) -> None:
    with server.api("alice") as api:
        c = make_conversation(api, profiles["paid"]["id"], pairs=1, title="Контекст")
    context = browser.new_context(
        viewport={"width": 1280, "height": 860}, locale="ru-RU", storage_state=alice_session
    )
    try:
        page = context.new_page()
        page.goto(server.url + "/c/" + c["id"])
        expect(page.locator("#messages > .message")).to_have_count(2)
        expect(page.locator("#counter-text")).not_to_have_text("–")
        block = page.get_by_role("group", name="Контекст диалога")
        expect(block.get_by_role("switch", name="Контекст диалога")).to_be_checked()
        mode = block.get_by_label("Режим памяти", exact=True)
        expect(mode.locator("option")).to_have_text(
            ["Экономный", "Учитывать всё", "Последние сообщения"]
        )
        expect(block.get_by_role("button", name="Память диалога")).to_be_visible()
        save_screenshot(page, "context-block-ru.png", readme=True)
        block.get_by_role("button", name="Память диалога").click()
        expect(page.locator("#mw-mode")).to_have_text("Полная память")
    finally:
        context.close()


def _compacted_past_half(api: Any, model: FakeModelServer, profile_id: str, title: str) -> Any:
    """A chat compacted once, whose recent messages then fill well over half of 16K."""
    c = make_conversation(api, profile_id, pairs=3, title=title)
    model.reply("Goal: talk. Key facts: topics 0 to 2.")
    body = api.post(f"/api/v1/conversations/{c['id']}/compact", json={}).json()
    if body.get("run_id"):
        finished_run(api, body["run_id"])
    for role in ("user", "assistant", "user", "assistant"):
        r = api.post(
            f"/api/v1/conversations/{c['id']}/messages",
            json={"role": role, "content": "word " * 2500},
        )
        assert r.status_code == 201, r.text
    plan = api.get(f"/api/v1/conversations/{c['id']}/context").json()
    assert plan["tokens"]["used"] > plan["tokens"]["window"] / 2, plan["tokens"]
    return c


def test_seed004_past_half_after_a_compaction_a_new_chat_is_suggested_once(
    alice: Any, server: Server, model: FakeModelServer, profiles: Any
) -> None:
    hint = alice.locator("#new-chat-hint")
    with server.api("alice") as api:
        small = make_conversation(api, profiles["paid"]["id"], pairs=2, title="Small")
        c = _compacted_past_half(api, model, profiles["paid"]["id"], "Long one")
        other = _compacted_past_half(api, model, profiles["paid"]["id"], "Long two")
    # Not past half: no hint.
    open_chat(alice, server, small)
    expect(alice.locator("#counter-text")).not_to_have_text("–")
    expect(hint).to_be_hidden()
    open_chat(alice, server, c)
    expect(hint).to_be_visible()
    expect(hint).to_contain_text("answers may start forgetting")
    expect(hint.get_by_role("button", name="Continue in a new chat")).to_be_visible()
    expect(hint.get_by_role("button", name="Move to a project")).to_be_visible()
    hint.get_by_role("button", name="Dismiss").click()
    expect(hint).to_be_hidden()
    # Never again for that conversation: not after a reload either.
    with alice.expect_response(lambda r: f"/conversations/{c['id']}/context" in r.url):
        alice.reload()
    expect(alice.locator("#counter-text")).not_to_have_text("–")
    expect(hint).to_be_hidden()
    # Another conversation has its own hint; "Move to a project" leads to the project choice,
    # "Continue in a new chat" opens the continued chat (CTX-23).
    open_chat(alice, server, other)
    expect(hint).to_be_visible()
    hint.get_by_role("button", name="Move to a project").click()
    expect(hint).to_be_hidden()
    expect(alice.locator("#project-select")).to_be_focused()
    with server.api("alice") as api:
        third = _compacted_past_half(api, model, profiles["paid"]["id"], "Long three")
    open_chat(alice, server, third)
    expect(hint).to_be_visible()
    hint.get_by_role("button", name="Continue in a new chat").click()
    expect(alice).not_to_have_url(re.compile(re.escape(third["id"])))
    expect(alice.locator(".compaction-marker")).to_contain_text(
        "This chat continues from the summary of an earlier chat"
    )
