"""Recall in the feed (issue 17): the model's look-up reads "Looked up earlier messages: …",
live and after a reload, and its result holds the verbatim sentence."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect
from tests.support.model_server import FakeModelServer
from tests.ui.harness import Server, make_conversation, make_profile, open_chat

pytestmark = pytest.mark.browser

VERBATIM = "the budget we agreed is 48,250 euros"


def test_a_recall_shows_as_a_look_up_of_earlier_messages(
    alice: Any, server: Server, model: FakeModelServer
) -> None:
    with server.api("alice") as api:
        profile = make_profile(api, model.base_url, "Recall model")
        c = make_conversation(api, profile["id"], title="Budget", mode="economy")
        path = f"/api/v1/conversations/{c['id']}/messages"
        for role, text in (
            ("user", f"Please note: {VERBATIM}."),
            ("assistant", "Noted."),
            ("user", "And the dates?"),
            ("assistant", "June 3 to June 9."),
        ):
            api.post(path, json={"role": role, "content": text}).raise_for_status()
        model.reply("Goal: a trip. Decisions: budget and dates fixed.")
        compacted = api.post(f"/api/v1/conversations/{c['id']}/compact", json={})
        assert compacted.status_code == 200, compacted.text
    model.tool_call("recall", {"query": "budget agreed"}, id="call_recall")
    model.reply("We agreed on 48,250 euros.", delay=0.02)
    alice.goto(server.url + "/c/" + c["id"])
    alice.get_by_role("textbox", name="Message").fill("What was the exact budget?")
    alice.get_by_role("textbox", name="Message").press("Enter")
    call = alice.locator(".tool-call.recall").first
    expect(call.locator("summary")).to_have_text("Looked up earlier messages: budget agreed")
    expect(alice.locator(".message.role-assistant").last).to_contain_text("48,250 euros.")
    result = alice.locator(".tool-result").first
    result.locator("summary").click()
    expect(result.locator("pre")).to_contain_text(VERBATIM)
    alice.reload()
    expect(alice.locator(".tool-call.recall summary")).to_have_text(
        "Looked up earlier messages: budget agreed"
    )


def test_the_memory_window_switches_recall_and_the_tools_row_follows(
    alice: Any, server: Server, model: FakeModelServer
) -> None:
    with server.api("alice") as api:
        profile = make_profile(api, model.base_url, "Switch model")
        c = make_conversation(api, profile["id"], pairs=2, title="Switch", mode="full")
    open_chat(alice, server, c)
    alice.locator("#counter").click()
    dialog = alice.get_by_role("dialog")
    switch = dialog.get_by_label("Recall: look up earlier messages word for word")
    tools = dialog.locator("tr[data-key=tools] td")
    expect(switch).to_be_checked()  # on by default in Everything
    expect(tools).not_to_have_text("0")
    switch.uncheck()
    expect(tools).to_have_text("0")
    with server.api("alice") as api:
        assert api.get(f"/api/v1/conversations/{c['id']}").json()["recall"] is False
    alice.reload()
    alice.locator("#counter").click()
    expect(switch).not_to_be_checked()
    switch.check()
    expect(tools).not_to_have_text("0")


def test_the_profile_editor_sets_the_profiles_recall(
    alice: Any, server: Server, model: FakeModelServer
) -> None:
    with server.api("alice") as api:
        profile = make_profile(api, model.base_url, "Editor model")
    alice.goto(server.url + "/profiles")
    row = alice.locator(f"li[data-id='{profile['id']}']")
    row.get_by_role("button", name="Edit").click()
    choice = alice.get_by_label("Recall: the model looks up earlier messages word for word")
    expect(choice).to_have_value("")
    choice.select_option(label="Never")
    alice.get_by_role("button", name="Save").click()
    expect(alice.locator("#profile-form")).to_be_hidden()
    with server.api("alice") as api:
        assert api.get(f"/api/v1/profiles/{profile['id']}").json()["recall"] is False
    row.get_by_role("button", name="Edit").click()
    expect(choice).to_have_value("off")
    choice.select_option(label="In Economy and Everything (default)")
    alice.get_by_role("button", name="Save").click()
    expect(alice.locator("#profile-form")).to_be_hidden()
    with server.api("alice") as api:
        assert api.get(f"/api/v1/profiles/{profile['id']}").json()["recall"] is None
