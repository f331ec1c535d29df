"""Memory, visible: the counter (CTX-17), the memory window (CTX-18), dimmed "Out of memory"
messages (CTX-14) and excluding pairs (CTX-15)."""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import expect
from tests.ui.harness import Server, make_conversation, open_chat, save_screenshot

pytestmark = pytest.mark.browser


def test_ctx17_counter_follows_the_draft_with_three_levels(
    alice: Any, server: Server, profiles: Any
) -> None:
    with server.api("alice") as api:
        c = make_conversation(api, profiles["paid"]["id"], pairs=1, title="Counter")
    open_chat(alice, server, c)
    counter = alice.locator("#counter")
    expect(counter).to_have_class("counter level-muted")
    assert alice.locator("#counter-text").inner_text().endswith(" / 16K")
    draft = alice.get_by_role("textbox", name="Message")
    draft.fill("word " * 6_000)  # ≈ 9.6K tokens: 59 %
    expect(counter).to_have_class("counter level-light")
    draft.fill("word " * 9_000)  # ≈ 14.4K tokens: 88 %
    expect(counter).to_have_class("counter level-red")
    draft.fill("")
    expect(counter).to_have_class("counter level-muted")
    save_screenshot(alice, "counter.png")


def test_ctx17_a_draft_too_long_for_a_url_is_counted_exactly(
    alice: Any, server: Server, profiles: Any
) -> None:
    """A pasted document (here code, then prose: their tokens per character differ) goes to
    the server whole, in a POST's body; the memory window shows the server's own count."""
    with server.api("alice") as api:
        c = make_conversation(api, profiles["paid"]["id"], pairs=1, title="Long draft")
    open_chat(alice, server, c)
    long = "for (i = 0; i < 10; i++) { a[i] = i * 42; }\n" * 400 + "A sentence of prose. " * 400
    with alice.expect_response(
        lambda r: (
            r.url.endswith(f"/api/v1/conversations/{c['id']}/context")
            and r.request.method == "POST"
        )
    ) as answer:
        alice.get_by_role("textbox", name="Message").fill(long)
    assert answer.value.request.post_data_json == {"draft": long}
    plan = answer.value.json()
    alice.locator("#counter").click()
    used = f"{plan['tokens']['used']:,}"
    expect(alice.get_by_role("dialog").locator("#mw-used")).to_have_text(
        f"Used ≈ {used} of 16,384 tokens"
    )


def test_ctx17_free_model_counter_reads_free(alice: Any, server: Server, profiles: Any) -> None:
    with server.api("alice") as api:
        c = make_conversation(api, profiles["free"]["id"], pairs=1, title="Free talk")
    open_chat(alice, server, c)
    expect(alice.locator("#counter-text")).to_have_text(re.compile(r"^Free · \d+(\.\d)?K? / 16K$"))
    alice.locator("#counter").click()
    expect(alice.locator("#mw-price")).to_have_text("Next request: free")  # CTX-18


def test_ctx18_memory_window_shows_every_row_price_threshold_and_mode(
    alice: Any, server: Server, profiles: Any
) -> None:
    with server.api("alice") as api:
        c = make_conversation(api, profiles["paid"]["id"], pairs=3, title="Memory window")
    open_chat(alice, server, c)
    alice.get_by_role("textbox", name="Message").fill("What did we decide about topic 2?")
    alice.locator("#counter").click()
    dialog = alice.get_by_role("dialog")
    expect(dialog).to_be_visible()
    expect(dialog.get_by_text("What goes into the next request")).to_be_visible()
    expect(dialog.locator("#mw-used")).to_have_text(re.compile(r"^Used ≈ [\d,]+ of 16,384 tokens$"))
    expect(dialog.locator("#mw-percent")).to_have_text(re.compile(r"^\d+%$"))
    # The rows shown: "Apps" only while an app gives the model context (APPS-3), none here.
    rows = dialog.locator("#mw-breakdown tr:not([hidden]) th")
    expect(rows).to_have_text(
        [
            "Instructions",
            "Tools",
            "Summary",
            "Messages",
            "Files",
            "Images",
            "Free",
            "Answer reserve",
        ]
    )
    expect(dialog.locator("tr[data-key=reserve] td")).to_have_text("1,024")
    expect(dialog.locator("#mw-price")).to_have_text(
        re.compile(r"^Next request ≈ \$[\d.]+ \+ answer$")
    )
    expect(dialog.locator("#mw-threshold")).to_have_text(
        re.compile(r"^Auto-compress from \d+(\.\d)?K$")
    )
    # The window names the mode as the help pages do (seed 001): "Everything" in the panel.
    expect(dialog.locator("#mw-mode-line")).to_contain_text("Mode: Full memory")
    # The price is asked from the server when the window opens (slow on a loaded machine).
    expect(dialog.get_by_role("button", name=re.compile(r"^Compress now · ≈ \$"))).to_be_visible(
        timeout=15_000
    )
    save_screenshot(alice, "memory-window.png", readme=True)
    dialog.get_by_role("link", name="Change").click()
    expect(dialog).to_be_hidden()
    expect(alice.get_by_role("switch", name="Conversation context")).to_be_focused()
    expect(alice.locator("#context-block")).to_have_class(re.compile(r"\bhighlight\b"))


def test_ctx14_messages_out_of_memory_are_dimmed_and_the_label_opens_the_window(
    alice: Any, server: Server, profiles: Any
) -> None:
    with server.api("alice") as api:
        c = make_conversation(
            api, profiles["paid"]["id"], pairs=2, title="No memory chat", mode="off"
        )
    open_chat(alice, server, c)
    messages = alice.locator("#messages > .message")
    expect(messages).to_have_count(4)
    expect(alice.locator("#messages > .message.dimmed")).to_have_count(4)
    label = messages.first.get_by_role("button", name="Out of memory")
    expect(label).to_be_visible()
    label.click()
    expect(alice.get_by_role("dialog")).to_be_visible()
    expect(alice.locator("#mw-mode")).to_have_text("No memory")
    alice.keyboard.press("Escape")
    # Switching the memory on (Everything, the mode kept beside the switch) brings them back.
    expect(alice.get_by_label("Memory mode", exact=True)).to_be_disabled()
    alice.get_by_role("switch", name="Conversation context").check()
    expect(alice.get_by_label("Memory mode", exact=True)).to_have_value("full")
    expect(alice.locator("#messages > .message.dimmed")).to_have_count(0)


def test_ctx15_excluding_a_pair_dims_it_and_including_restores_it(
    alice: Any, server: Server, profiles: Any
) -> None:
    with server.api("alice") as api:
        c = make_conversation(api, profiles["paid"]["id"], pairs=2, title="Exclusions")
    open_chat(alice, server, c)
    first_question = alice.locator("#messages > .message.role-user").first
    expect(alice.locator("#messages > .message.dimmed")).to_have_count(0)
    first_question.get_by_role("button", name="Exclude from memory").click()
    expect(alice.locator("#messages > .message.dimmed")).to_have_count(
        2
    )  # the question and its answer
    # One label per state: an excluded pair says "Excluded from memory" only.
    first_answer = alice.locator("#messages > .message.role-assistant").first
    for message in (first_question, first_answer):
        expect(message.locator(".excluded-label")).to_have_text("Excluded from memory")
        expect(message.locator(".excluded-label")).to_be_visible()
        expect(message.get_by_role("button", name="Out of memory")).to_be_hidden()
    first_question.get_by_role("button", name="Include in memory").click()
    expect(alice.locator("#messages > .message.dimmed")).to_have_count(0)
