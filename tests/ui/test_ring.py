"""The ring beside the model selector is the "Context and usage" button (seed 004): always
shown; without usage limits it fills to the conversation's context use, and it opens a small
dialog with the values as text, closed by Escape with focus back on the ring."""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import expect
from tests.ui.harness import Server, make_conversation, open_chat

pytestmark = pytest.mark.browser


def test_seed004_without_limits_the_ring_shows_the_context_and_opens_a_dialog(
    alice: Any, server: Server, profiles: Any
) -> None:
    with server.api("alice") as api:
        c = make_conversation(api, profiles["paid"]["id"], pairs=2, title="Ring")
        plan = api.get(f"/api/v1/conversations/{c['id']}/context").json()
    open_chat(alice, server, c)
    ring = alice.get_by_role("button", name="Context and usage")
    expect(ring).to_be_visible()
    expect(ring).to_have_attribute("aria-expanded", "false")
    # The draft counts: ≈ 9.6K of 16K tokens, so the ring fills to about 59 %.
    alice.get_by_role("textbox", name="Message").fill("word " * 6_000)
    expect(alice.locator("#counter")).to_have_class("counter level-light")
    expect(ring.locator(".ring-fill")).to_have_attribute(
        "stroke-dasharray", re.compile(r"^[56]\d 100$")
    )
    alice.get_by_role("textbox", name="Message").fill("")
    expect(alice.locator("#counter")).to_have_class("counter level-muted")

    ring.focus()
    alice.keyboard.press("Enter")
    expect(ring).to_have_attribute("aria-expanded", "true")
    dialog = alice.get_by_role("dialog", name="Context and usage")
    expect(dialog).to_be_visible()
    expect(dialog).to_be_focused()
    used, window = plan["tokens"]["used"], plan["tokens"]["window"]
    percent = int(used * 100 / window + 0.5)
    expect(dialog.locator("#up-context")).to_have_text(f"{used} of 16K tokens ({percent}%)")
    if plan.get("compaction", {}).get("threshold"):
        expect(dialog.locator("#up-threshold")).to_have_text(re.compile(r"^Auto-compress from \d"))
    expect(dialog.get_by_text("No usage limits on this server")).to_be_visible()
    expect(dialog.locator("#up-session")).to_be_hidden()
    link = dialog.get_by_role("link", name="Usage details and reset times")
    expect(link).to_have_attribute("href", "/usage")

    alice.keyboard.press("Escape")
    expect(dialog).to_be_hidden()
    expect(ring).to_have_attribute("aria-expanded", "false")
    expect(ring).to_be_focused()

    ring.click()
    dialog.get_by_role("button", name="Open the memory window").click()
    expect(dialog).to_be_hidden()
    expect(alice.locator("#memory-window")).to_be_visible()
