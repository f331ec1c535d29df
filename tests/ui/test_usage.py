"""Usage and limits in the UI: the ring, the fallback model with locks on the others, and
the warning with "Request extension" (USE-2, USE-3)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import expect
from tests.support.model_server import FakeModelServer
from tests.support.runs import finished_run
from tests.ui.harness import (
    Server,
    make_conversation,
    make_profile,
    save_screenshot,
    start_server,
)

pytestmark = pytest.mark.browser

LIMITS = {"CHATMEM_USAGE_SESSION_LIMIT": "0.00001", "CHATMEM_USAGE_WEEK_LIMIT": "1"}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, model: FakeModelServer) -> Iterator[Server]:
    """Tiny included usage; the fallback profile is known only after a first start."""
    state = tmp_path_factory.mktemp("ui-usage") / "state"
    first = start_server(state, **LIMITS)
    try:
        first.add_user("alice")
        with first.api("alice") as api:
            make_profile(
                api,
                model.base_url,
                "Premium",
                input_price_per_mtok=30.0,
                output_price_per_mtok=60.0,
            )
            base = make_profile(api, model.base_url, "Base", free=True)
    finally:
        first.stop()
    srv = start_server(state, **LIMITS, CHATMEM_USAGE_FALLBACK_PROFILE_ID=base["id"])
    srv.sessions.update(first.sessions)
    try:
        yield srv
    finally:
        srv.stop()


def _exhausted(server: Server, model: FakeModelServer) -> dict[str, Any]:
    """Alice's included usage used up (spent once for the module); her profiles by name."""
    with server.api("alice") as api:
        if not api.get("/api/v1/usage").json()["exhausted"]:
            _spend(server, model)
        return {p["name"]: p for p in api.get("/api/v1/profiles").json()["items"]}


def _spend(server: Server, model: FakeModelServer) -> None:
    with server.api("alice") as api:
        premium = next(
            p for p in api.get("/api/v1/profiles").json()["items"] if p["name"] == "Premium"
        )
        c = make_conversation(api, premium["id"], title="Costly")
        model.reply("An expensive answer.", usage=(1000, 1000))
        run = api.post(f"/api/v1/conversations/{c['id']}/turns", json={"content": "Spend"}).json()
        finished_run(api, run["run_id"])
        assert api.get("/api/v1/usage").json()["exhausted"] is True


def test_use2_use3_exhausted_usage_locks_models_and_offers_an_extension(
    alice: Any, server: Server, model: FakeModelServer
) -> None:
    ring = alice.locator("#usage-ring")
    expect(ring).to_be_visible()
    expect(ring).not_to_have_class("usage-ring exhausted")
    expect(alice.locator("#credit-warning")).to_be_hidden()
    _spend(server, model)
    alice.reload()
    expect(ring).to_have_class("usage-ring exhausted")
    expect(alice.locator("#model-note")).to_have_text("Credits exhausted: you can only use Base")
    select = alice.get_by_label("Model")
    expect(select).to_have_value(
        next(
            o for o in alice.locator("#model-select option").all() if "Base" in o.inner_text()
        ).get_attribute("value")
    )
    premium = alice.locator("#model-select option", has_text="Premium")
    expect(premium).to_have_text("🔒 Premium · fake-model")
    expect(premium).to_be_disabled()
    warning = alice.locator("#credit-warning")
    expect(warning).to_contain_text("You have used the included usage for this session window.")
    warning.get_by_role("button", name="Request extension").click()
    expect(alice.locator("#toast")).to_have_text("The administrators were notified")
    warning.get_by_role("button", name="Request extension").click()
    expect(alice.locator("#toast")).to_have_text("Administrators were already notified")


def test_use4_a_chat_on_a_locked_model_shows_the_fallback_and_each_lock_says_why(
    alice: Any, server: Server, model: FakeModelServer
) -> None:
    with server.api("alice") as api:
        profiles = _exhausted(server, model)
        c = make_conversation(api, profiles["Premium"]["id"], title="Chosen premium")
        alice.goto(server.url + "/c/" + c["id"])
        expect(alice.locator("#chat-title")).to_have_text("Chosen premium")
        # The selector shows the model that answers, not the locked one the chat was set to.
        expect(alice.get_by_label("Model", exact=True)).to_have_value(profiles["Base"]["id"])
        premium = alice.locator("#model-select option", has_text="Premium")
        expect(premium).to_have_text("🔒 Premium · fake-model")
        expect(premium).to_have_attribute("title", re.compile(r"^Credits exhausted — resets \S"))
        base = alice.locator("#model-select option", has_text="Base")
        expect(base).not_to_have_attribute("title", re.compile("."))
        # Shown, not chosen: the chat keeps its own model for when the credits are back.
        assert (
            api.get(f"/api/v1/conversations/{c['id']}").json()["profile_id"]
            == (profiles["Premium"]["id"])
        )


def test_seed004_auto_is_locked_and_the_note_links_to_the_usage_page(
    alice: Any, server: Server, model: FakeModelServer
) -> None:
    _exhausted(server, model)
    alice.reload()
    auto = alice.locator("#model-select option[value=auto]")
    expect(auto).to_be_disabled()
    expect(auto).to_have_text(re.compile(r"^🔒 "))
    expect(auto).to_have_attribute("title", re.compile(r"^Credits exhausted"))
    note = alice.get_by_role("link", name="Credits exhausted: you can only use Base")
    expect(note).to_have_attribute("href", "/usage")
    # For the picture, the selector's options shown as a list (a closed native select hides them).
    alice.locator("#model-select").evaluate("s => { s.size = s.options.length; }")
    save_screenshot(alice, "locked-selector.png", readme=True)
    alice.locator("#model-select").evaluate("s => { s.size = 0; }")
    note.click()
    alice.wait_for_url(server.url + "/usage")


def test_seed004_under_a_lock_the_window_prices_and_names_the_fallback(
    alice: Any, server: Server, model: FakeModelServer
) -> None:
    with server.api("alice") as api:
        profiles = _exhausted(server, model)
        c = make_conversation(api, profiles["Premium"]["id"], title="Priced by the fallback")
    alice.goto(server.url + "/c/" + c["id"])
    expect(alice.locator("#chat-title")).to_have_text("Priced by the fallback")
    alice.get_by_role("textbox", name="Message").fill("How much will this cost?")
    expect(alice.locator("#counter-text")).to_have_text(re.compile(r"^Free · "))
    alice.locator("#counter").click()
    dialog = alice.get_by_role("dialog")
    expect(dialog.locator("#mw-answered")).to_have_text("Answered by Base: credits exhausted")
    expect(dialog.locator("#mw-price")).to_have_text("Next request: free")


def test_seed004_the_models_page_sets_a_place_in_autos_order(alice: Any, server: Server) -> None:
    alice.goto(server.url + "/profiles")
    row = alice.locator("#profile-list li", has_text="Premium")
    row.get_by_role("button", name="Edit").click()
    alice.get_by_label("Place in Auto's order").fill("2")
    alice.get_by_role("button", name="Save").click()
    expect(row).to_contain_text("Auto: 2")
    with server.api("alice") as api:
        premium = next(
            p for p in api.get("/api/v1/profiles").json()["items"] if p["name"] == "Premium"
        )
        assert premium["auto_rank"] == 2
        api.patch(f"/api/v1/profiles/{premium['id']}", json={"auto_rank": None})


def test_seed004_the_ring_opens_context_and_usage_with_reset_times(
    alice: Any, server: Server, model: FakeModelServer
) -> None:
    with server.api("alice") as api:
        profiles = _exhausted(server, model)
        c = make_conversation(api, profiles["Base"]["id"], pairs=3, title="Ring and limits")
    alice.goto(server.url + "/c/" + c["id"])
    expect(alice.locator("#chat-title")).to_have_text("Ring and limits")
    expect(alice.locator("#counter-text")).not_to_have_text("–")
    ring = alice.get_by_role("button", name="Context and usage")
    # With limits the ring follows the usage: used up, it is full and red.
    expect(ring).to_have_class("usage-ring exhausted")
    expect(ring.locator(".ring-fill")).to_have_attribute("stroke-dasharray", "100 100")
    ring.click()
    dialog = alice.get_by_role("dialog", name="Context and usage")
    expect(dialog.locator("#up-context")).to_have_text(re.compile(r"^\d+ of \S+ tokens \(\d+%\)$"))
    expect(dialog.locator("#up-session")).to_have_text(
        re.compile(r"^Session: 100% used, resets \S")
    )
    expect(dialog.locator("#up-week")).to_have_text(re.compile(r"^This week: \d+% used"))
    expect(dialog.get_by_text("No usage limits on this server")).to_be_hidden()
    save_screenshot(alice, "ring.png", readme=True)
    dialog.get_by_role("link", name="Usage details and reset times").click()
    alice.wait_for_url(server.url + "/usage")
