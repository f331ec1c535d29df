"""Memory, visible: the counter (CTX-17), the memory window (CTX-18), dimmed "Out of memory"
messages (CTX-14), the compression marker (CTX-10), Compress now (CTX-11), excluding pairs
(CTX-15), files (CTX-16), and requests that do not fit (CTX-19)."""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import expect
from tests.support.model_server import FakeModelServer
from tests.ui.harness import Server, make_conversation, make_profile, save_screenshot

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def profiles(server: Server, model: FakeModelServer) -> dict[str, dict[str, Any]]:
    with server.api("alice") as api:
        return {
            "paid": make_profile(
                api,
                model.base_url,
                "Paid model",
                context_window=16384,
                answer_reserve=1024,
                input_price_per_mtok=3.0,
                output_price_per_mtok=15.0,
            ),
            "free": make_profile(
                api,
                model.base_url,
                "Free model",
                context_window=16384,
                answer_reserve=1024,
                free=True,
            ),
        }


def _open(page: Any, server: Server, conversation: dict[str, Any]) -> None:
    page.goto(server.url + "/c/" + conversation["id"])
    expect(page.locator("#chat-title")).to_have_text(conversation["title"])
    expect(page.locator("#counter-text")).not_to_have_text("–")


def test_ctx17_counter_follows_the_draft_with_three_levels(
    alice: Any, server: Server, profiles: Any
) -> None:
    with server.api("alice") as api:
        c = make_conversation(api, profiles["paid"]["id"], pairs=1, title="Counter")
    _open(alice, server, c)
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


def test_ctx17_free_model_counter_reads_free(alice: Any, server: Server, profiles: Any) -> None:
    with server.api("alice") as api:
        c = make_conversation(api, profiles["free"]["id"], pairs=1, title="Free talk")
    _open(alice, server, c)
    expect(alice.locator("#counter-text")).to_have_text(re.compile(r"^Free · \d+(\.\d)?K? / 16K$"))


def test_ctx18_memory_window_shows_every_row_price_threshold_and_mode(
    alice: Any, server: Server, profiles: Any
) -> None:
    with server.api("alice") as api:
        c = make_conversation(api, profiles["paid"]["id"], pairs=3, title="Memory window")
    _open(alice, server, c)
    alice.get_by_role("textbox", name="Message").fill("What did we decide about topic 2?")
    alice.locator("#counter").click()
    dialog = alice.get_by_role("dialog")
    expect(dialog).to_be_visible()
    expect(dialog.get_by_text("What goes into the next request")).to_be_visible()
    expect(dialog.locator("#mw-used")).to_have_text(re.compile(r"^Used ≈ [\d,]+ of 16,384 tokens$"))
    expect(dialog.locator("#mw-percent")).to_have_text(re.compile(r"^\d+%$"))
    rows = dialog.locator("#mw-breakdown th")
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
    expect(dialog.locator("#mw-mode-line")).to_contain_text("Mode: Everything")
    expect(dialog.get_by_role("button", name=re.compile(r"^Compress now · ≈ \$"))).to_be_visible()
    save_screenshot(alice, "memory-window.png", readme=True)
    dialog.get_by_role("link", name="Change").click()
    expect(dialog).to_be_hidden()
    expect(alice.get_by_label("Memory", exact=True)).to_be_focused()


def test_ctx14_messages_out_of_memory_are_dimmed_and_the_label_opens_the_window(
    alice: Any, server: Server, profiles: Any
) -> None:
    with server.api("alice") as api:
        c = make_conversation(
            api, profiles["paid"]["id"], pairs=2, title="No memory chat", mode="off"
        )
    _open(alice, server, c)
    messages = alice.locator("#messages > .message")
    expect(messages).to_have_count(4)
    expect(alice.locator("#messages > .message.dimmed")).to_have_count(4)
    label = messages.first.get_by_role("button", name="Out of memory")
    expect(label).to_be_visible()
    label.click()
    expect(alice.get_by_role("dialog")).to_be_visible()
    expect(alice.locator("#mw-mode")).to_have_text("No memory")
    alice.keyboard.press("Escape")
    # Switching to Everything brings them back into memory.
    alice.get_by_label("Memory", exact=True).select_option(label="Everything")
    expect(alice.locator("#messages > .message.dimmed")).to_have_count(0)


def test_ctx15_excluding_a_pair_dims_it_and_including_restores_it(
    alice: Any, server: Server, profiles: Any
) -> None:
    with server.api("alice") as api:
        c = make_conversation(api, profiles["paid"]["id"], pairs=2, title="Exclusions")
    _open(alice, server, c)
    first_question = alice.locator("#messages > .message.role-user").first
    expect(alice.locator("#messages > .message.dimmed")).to_have_count(0)
    first_question.get_by_role("button", name="Exclude from memory").click()
    expect(alice.locator("#messages > .message.dimmed")).to_have_count(
        2
    )  # the question and its answer
    expect(first_question.get_by_role("button", name="Out of memory")).to_be_visible()
    expect(first_question.locator(".excluded-label")).to_be_visible()
    first_question.get_by_role("button", name="Include in memory").click()
    expect(alice.locator("#messages > .message.dimmed")).to_have_count(0)


def test_ctx10_ctx11_compress_now_with_focus_price_marker_and_refusal(
    alice: Any, server: Server, model: FakeModelServer, profiles: Any, console: Any
) -> None:
    with server.api("alice") as api:
        c = make_conversation(api, profiles["paid"]["id"], pairs=4, title="Compression")
    _open(alice, server, c)
    alice.locator("#counter").click()
    dialog = alice.get_by_role("dialog")
    button = dialog.get_by_role("button", name=re.compile(r"^Compress now · ≈ \$[\d.]+$"))
    expect(button).to_be_visible()
    dialog.get_by_placeholder("What to emphasise — optional").fill("the numbers")
    model.reply("Goal: discuss topics. Key facts: topic 0 to 3 are interesting.", delay=0.15)
    button.click()
    expect(dialog.locator("#compress-button")).to_have_text("Compressing…")
    expect(dialog.locator("#compress-result")).to_contain_text("Done")
    marker = alice.locator(".compaction-marker")
    expect(marker.locator(".compaction-text")).to_have_text(
        re.compile(r"^Memory compressed — \d+ earlier messages summarised$")
    )
    assert "the numbers" in str(model.chat_requests[-1].messages)
    alice.keyboard.press("Escape")
    expect(alice.locator("#messages > .message.dimmed").first).to_be_visible()
    marker.get_by_role("button", name="Show summary").click()
    expect(marker.locator(".summary-text")).to_contain_text("topic 0 to 3 are interesting")
    # Nothing new since the summary: refused (409) with the CTX-11 message.
    console.allow("409")
    alice.locator("#counter").click()
    dialog.get_by_role("button", name=re.compile(r"^Compress now")).click()
    expect(dialog.locator("#compress-result")).to_have_text("Nothing to compress yet")


def test_ctx16_files_show_tokens_and_can_be_pinned_excluded_included(
    alice: Any, server: Server, profiles: Any
) -> None:
    with server.api("alice") as api:
        c = make_conversation(api, profiles["paid"]["id"], pairs=1, title="Files")
    _open(alice, server, c)
    alice.locator("#attach-file").set_input_files(
        files=[
            {
                "name": "notes.txt",
                "mimeType": "text/plain",
                "buffer": ("a line of notes\n" * 200).encode(),
            }
        ]
    )
    expect(alice.locator("#attachments .chip")).to_contain_text("notes.txt ·")
    alice.locator("#counter").click()
    row = alice.locator("#mw-file-list li", has_text="notes.txt")
    expect(row.locator(".file-tokens")).to_have_text(re.compile(r"^[\d,]+ tokens$"))
    assert row.locator(".file-tokens").inner_text() != "0 tokens"
    row.get_by_role("button", name="Pin notes.txt").click()
    expect(row.locator(".file-state")).to_have_text("Pinned")
    row.get_by_role("button", name="Exclude notes.txt").click()
    expect(row.locator(".file-state")).to_have_text("Excluded")
    row.get_by_role("button", name="Include notes.txt").click()
    expect(row.locator(".file-state")).not_to_have_text("Excluded")


def test_ctx19_a_message_that_does_not_fit_is_not_sent_and_offers_ways_out(
    alice: Any, server: Server, model: FakeModelServer, profiles: Any, console: Any
) -> None:
    console.allow("413")
    with server.api("alice") as api:
        c = make_conversation(api, profiles["paid"]["id"], pairs=1, title="Too big")
    _open(alice, server, c)
    sent_before = len(model.chat_requests)
    alice.get_by_role("textbox", name="Message").fill("word " * 60_000)
    alice.get_by_role("button", name="Send").click()
    error = alice.locator("#chat-error")
    expect(error).to_contain_text("The message does not fit in the model's memory")
    for way in ("Compress now", "Remove files", "Start a new chat"):
        expect(error.get_by_role("button", name=way)).to_be_visible()
    assert len(model.chat_requests) == sent_before


def test_ctx19_provider_context_error_suggests_economy_exclusions_or_a_bigger_model(
    alice: Any, server: Server, model: FakeModelServer, profiles: Any
) -> None:
    with server.api("alice") as api:
        c = make_conversation(api, profiles["paid"]["id"], pairs=1, title="Provider refuses")
    _open(alice, server, c)
    model.context_length_error()
    alice.get_by_role("textbox", name="Message").fill("One more question")
    alice.get_by_role("textbox", name="Message").press("Enter")
    error = alice.locator("#chat-error")
    expect(error).to_contain_text("Economy")
    error.get_by_role("button", name="Switch to Economy").click()
    expect(alice.get_by_label("Memory", exact=True)).to_have_value("economy")


def test_ctx11_compress_now_is_refused_while_a_turn_runs(
    alice: Any, server: Server, model: FakeModelServer, profiles: Any, console: Any
) -> None:
    console.allow("409")
    with server.api("alice") as api:
        c = make_conversation(api, profiles["paid"]["id"], pairs=3, title="Busy")
        model.reply(" ".join(f"slow{i}" for i in range(60)), delay=0.1)
        api.post(f"/api/v1/conversations/{c['id']}/turns", json={"content": "Take your time"})
    _open(alice, server, c)
    expect(alice.get_by_role("button", name="Stop")).to_be_visible()
    alice.locator("#counter").click()
    dialog = alice.get_by_role("dialog")
    dialog.get_by_role("button", name=re.compile(r"^Compress now")).click()
    expect(dialog.locator("#compress-result")).to_have_text(
        "Compression is already running, try again in a minute"
    )
    alice.keyboard.press("Escape")
    alice.get_by_role("button", name="Stop").click()
    expect(alice.get_by_role("button", name="Send")).to_be_visible()
