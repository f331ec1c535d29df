"""Compress now (CTX-10, CTX-11), files in memory (CTX-16), and requests that do not fit or
that the provider refuses as too long (CTX-19)."""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import expect
from tests.support.model_server import FakeModelServer
from tests.ui.harness import Server, make_conversation, open_chat

pytestmark = pytest.mark.browser


def test_ctx10_ctx11_compress_now_with_focus_price_marker_and_refusal(
    alice: Any, server: Server, model: FakeModelServer, profiles: Any, console: Any
) -> None:
    with server.api("alice") as api:
        c = make_conversation(api, profiles["paid"]["id"], pairs=4, title="Compression")
    open_chat(alice, server, c)
    alice.locator("#counter").click()
    dialog = alice.get_by_role("dialog")
    button = dialog.get_by_role("button", name=re.compile(r"^Compress now · ≈ \$[\d.]+$"))
    expect(button).to_be_visible(timeout=15_000)
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
    open_chat(alice, server, c)
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
    open_chat(alice, server, c)
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
    open_chat(alice, server, c)
    model.context_length_error()
    alice.get_by_role("textbox", name="Message").fill("One more question")
    alice.get_by_role("textbox", name="Message").press("Enter")
    error = alice.locator("#chat-error")
    expect(error).to_contain_text("Economy")
    error.get_by_role("button", name="Switch to Economy").click()
    expect(alice.get_by_label("Memory mode", exact=True)).to_have_value("economy")


def test_ctx11_compress_now_is_refused_while_a_turn_runs(
    alice: Any, server: Server, model: FakeModelServer, profiles: Any, console: Any
) -> None:
    console.allow("409")
    with server.api("alice") as api:
        c = make_conversation(api, profiles["paid"]["id"], pairs=3, title="Busy")
        model.reply(" ".join(f"slow{i}" for i in range(60)), delay=0.1)
        api.post(f"/api/v1/conversations/{c['id']}/turns", json={"content": "Take your time"})
    open_chat(alice, server, c)
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


def test_ctx10_automatic_compaction_during_a_turn_shows_the_marker(
    alice: Any, server: Server, model: FakeModelServer, profiles: Any, console: Any
) -> None:
    with server.api("alice") as api:
        c = make_conversation(api, profiles["paid"]["id"], title="Auto compaction")
        path = f"/api/v1/conversations/{c['id']}/messages"
        # 30 messages of ≈ 560 tokens: past the 13K threshold, while the last 20 still fit.
        for i in range(15):
            for role in ("user", "assistant"):
                body = {"role": role, "content": f"{role} {i} " + "detail " * 350}
                api.post(path, json=body).raise_for_status()
        plan = api.get(f"/api/v1/conversations/{c['id']}/context?draft=And%20now%3F").json()
        assert plan["compaction"]["needed"] is True
    open_chat(alice, server, c)
    expect(alice.locator(".compaction-marker")).to_have_count(0)
    # However many summariser rounds the fold takes (CTX-21; the profile's calibration from
    # earlier tests may add one), each gets the summary; then the answer.
    model.reset()
    default, model.default_reply = model.default_reply, "Summary: fifteen detailed exchanges."
    try:
        alice.get_by_role("textbox", name="Message").fill("And now?")
        alice.get_by_role("textbox", name="Message").press("Enter")
        expect(alice.locator(".message.role-assistant").last).to_contain_text(
            "Summary: fifteen detailed exchanges."
        )
    finally:
        model.default_reply = default
    answer = [r for r in model.chat_requests if "And now?" in str(r.messages[-1:])]
    assert len(answer) == 1 and len(model.chat_requests) >= 2  # folded first, then answered
    marker = alice.locator(".compaction-marker")
    expect(marker.locator(".compaction-text")).to_have_text(
        re.compile(r"^Memory compressed — \d+ earlier messages summarised$")
    )
    # The marker is drawn again for each summary version the rounds store; open the last.
    with server.api("alice") as api:
        stored = api.get(f"/api/v1/conversations/{c['id']}/summary").json()
    expect(marker).to_have_attribute(
        "data-key", re.compile(rf"^{stored['id']}\|{stored['version']}\|")
    )
    marker.get_by_role("button", name="Show summary").click()
    expect(marker.locator(".summary-text")).to_contain_text("fifteen detailed exchanges")
    expect(alice.locator("#messages > .message.dimmed").first).to_be_visible()
