"""CTX-24 in the browser: text selected in a message → "Remember always" → the fact is in the
memory window's "Pinned facts" (with its row in the breakdown) and in the next request."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect
from tests.support.model_server import FakeModelServer
from tests.ui.harness import Server, make_conversation, open_chat, save_screenshot

from chatmem.context.pinned_facts import HEADER

pytestmark = pytest.mark.browser


def test_ctx24_select_text_remember_always_then_it_is_in_the_window_and_the_next_request(
    alice: Any, server: Server, profiles: Any, model: FakeModelServer
) -> None:
    with server.api("alice") as api:
        c = make_conversation(api, profiles["paid"]["id"], pairs=1, title="Pinned facts")
    open_chat(alice, server, c)
    answer = alice.locator(".message.role-assistant .content").first
    answer.select_text()  # as a user drags over it
    remember = alice.locator(".remember-selection")
    expect(remember).to_be_visible()
    expect(remember).to_have_text("Remember always")
    remember.click()
    expect(remember).to_be_hidden()

    # the keyboard way: select the question, Alt+Shift+R
    alice.locator(".message.role-user .content").first.select_text()
    expect(remember).to_be_visible()
    alice.keyboard.press("Alt+Shift+R")
    expect(remember).to_be_hidden()

    alice.locator("#counter").click()
    dialog = alice.get_by_role("dialog")
    facts = dialog.locator("#mw-fact-list li .fact-text")
    expect(facts).to_have_text(
        ["Answer 0: topic 0 is interesting.", "Question 0: tell me about topic 0."]
    )
    row = dialog.locator('#mw-breakdown tr[data-key="facts"]')
    expect(row).to_be_visible()
    expect(row.locator("td")).not_to_have_text("0")
    save_screenshot(alice, "pinned-facts.png")
    dialog.get_by_role("button", name="Close").click()

    model.reply("Noted.")
    draft = alice.get_by_role("textbox", name="Message")
    draft.fill("What did you say about topic 0?")
    draft.press("Enter")
    expect(alice.locator(".message.role-assistant").last).to_contain_text("Noted.")
    sent = [m for m in model.chat_requests[-1].messages if HEADER in str(m["content"])]
    assert len(sent) == 1
    assert (
        "- Answer 0: topic 0 is interesting.\n- Question 0: tell me about topic 0."
        in (sent[0]["content"])
    )


def test_ctx24_the_summary_view_offers_remember_always_per_kept_fact(
    alice: Any, server: Server, profiles: Any, model: FakeModelServer
) -> None:
    """The fact guard kept an order number the summariser left out (CTX-24): the summary
    view offers "Remember always" for it, and it becomes a pinned fact."""
    with server.api("alice") as api:
        c = make_conversation(api, profiles["paid"]["id"], title="Kept facts")
        for role, text in (
            ("user", "My order is ORD-58213, please track it."),
            ("assistant", "Tracking it."),
            ("user", "Thanks."),
            ("assistant", "You are welcome."),
        ):
            said = api.post(
                f"/api/v1/conversations/{c['id']}/messages", json={"role": role, "content": text}
            )
            assert said.status_code == 201, said.text
        model.reply("Goal: tracking an order.")
        assert api.post(f"/api/v1/conversations/{c['id']}/compact", json={}).status_code == 200
        summary = api.get(f"/api/v1/conversations/{c['id']}/summary").json()
    (kept,) = [f for f in summary["facts_kept"] if f["text"] == "ORD-58213"]
    first = kept["message_id"]

    open_chat(alice, server, c)
    marker = alice.locator(".compaction-marker")
    marker.get_by_role("button", name="Show summary").click()
    pins = marker.locator(".summary-facts .kept-fact")
    expect(pins).to_have_count(len(summary["facts_kept"]))
    fact = pins.filter(has_text=kept["text"])
    fact.get_by_role("button", name=f"Remember always: {kept['text']}").click()
    expect(fact.get_by_role("button", name=f"Remember always: {kept['text']}")).to_have_text(
        "Remembered"
    )
    with server.api("alice") as api:
        facts = api.get(f"/api/v1/conversations/{c['id']}/facts").json()["items"]
    assert [(f["text"], f["message_id"]) for f in facts] == [(kept["text"], first)]
