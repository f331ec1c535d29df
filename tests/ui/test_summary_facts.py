"""CTX-24, what the user sees: "Show summary" shows the fact guard's kept section apart from
the model's words, each fact with its date, and the line naming what did not fit."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect
from tests.support.model_server import FakeModelServer
from tests.ui.harness import Server, make_profile, open_chat, save_screenshot

pytestmark = pytest.mark.browser

MODEL_TEXT = "Goal: a new kitchen."


def _post(api: Any, cid: str, role: str, content: str) -> None:
    r = api.post(f"/api/v1/conversations/{cid}/messages", json={"role": role, "content": content})
    assert r.status_code == 201, r.text


def test_ctx24_the_kept_section_is_shown_apart_and_the_dropped_are_counted(
    alice: Any, server: Server, model: FakeModelServer
) -> None:
    with server.api("alice") as api:
        # An 8K window: the summary's cap (1,024 tokens) cannot hold 150 references.
        profile = make_profile(api, model.base_url, "Small memory", context_window=8192, free=True)
        c = api.post(
            "/api/v1/conversations", json={"title": "Kitchen facts", "profile_id": profile["id"]}
        ).json()
        _post(api, c["id"], "user", "The budget is 4,200 EUR and the order is ORD-58213.")
        _post(api, c["id"], "assistant", "Noted.")
        refs = " ".join(f"REF-{10_000 + k}" for k in range(150))
        _post(api, c["id"], "user", f"The shelf references: {refs}.")
        _post(api, c["id"], "assistant", "Stored.")
        _post(api, c["id"], "user", "Thanks.")
        _post(api, c["id"], "assistant", "You are welcome.")
        model.reply(MODEL_TEXT)
        assert api.post(f"/api/v1/conversations/{c['id']}/compact", json={}).status_code == 200
        summary = api.get(f"/api/v1/conversations/{c['id']}/summary").json()
    kept, dropped = summary["facts_kept"], summary["facts_dropped_count"]
    assert kept and dropped > 0  # the newest user facts first: the older ones did not fit

    open_chat(alice, server, c)
    marker = alice.locator(".compaction-marker")
    marker.get_by_role("button", name="Show summary").click()
    # The model's words alone in the text box …
    expect(marker.locator(".summary-text")).to_have_text(MODEL_TEXT)
    # … and the kept section apart, each fact with its message's date.
    facts = marker.locator(".summary-facts")
    expect(facts.get_by_role("heading", name="Kept verbatim")).to_be_visible()
    expect(facts.locator(".kept-fact")).to_have_count(len(kept))
    first = facts.locator(".kept-fact").first
    expect(first.locator(".fact-text")).to_have_text(kept[0]["text"])
    expect(first.locator(".fact-date")).to_have_text(kept[0]["date"])
    expect(facts.locator(".facts-dropped")).to_have_text(
        f"{dropped} facts did not fit: ask for them and recall finds them."
    )
    # Each kept fact can be pinned (facts.js).
    expect(first.locator(".remember-fact")).to_be_visible()
    save_screenshot(alice, "summary-facts.png")
    # The editor edits the whole text, kept section included.
    marker.get_by_role("button", name="Edit the summary").click()
    expect(marker.get_by_role("textbox", name="Summary text")).to_have_value(summary["text"])
    expect(facts).to_be_hidden()
