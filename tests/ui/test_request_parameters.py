"""Issue 29: a model profile's request parameters on the profile page — its defaults and
pins edited as JSON, shown in its line, refused with the API's message when wrong."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect
from tests.support.model_server import FakeModelServer
from tests.ui.harness import Server, make_profile

pytestmark = pytest.mark.browser


def test_the_profile_editor_sets_request_defaults_and_pins(
    alice: Any, server: Server, model: FakeModelServer, console: Any
) -> None:
    console.allow(r"HTTP 422 PATCH .*/api/v1/profiles/")  # the refused save, on purpose
    with server.api("alice") as api:
        profile = make_profile(api, model.base_url, "Tuned model")
    alice.goto(server.url + "/profiles")
    row = alice.locator(f"li[data-id='{profile['id']}']")
    row.get_by_role("button", name="Edit").click()
    defaults = alice.get_by_label("Defaults: used when the client sends none")
    pins = alice.get_by_label("Pinned: used whatever the client sends")
    expect(defaults).to_have_value("")
    defaults.fill('{"temperature": 0.2}')
    pins.fill('{"temperature": 9}')
    alice.get_by_role("button", name="Save").click()
    expect(alice.locator("#profile-error")).to_contain_text("temperature")
    pins.fill('{"max_tokens": 500}')
    alice.get_by_role("button", name="Save").click()
    expect(alice.locator("#profile-form")).to_be_hidden()
    expect(row).to_contain_text("pinned: max_tokens 500")
    expect(row).to_contain_text("defaults: temperature 0.2")
    with server.api("alice") as api:
        shown = api.get(f"/api/v1/profiles/{profile['id']}").json()
    assert shown["request_defaults"] == {"temperature": 0.2}
    assert shown["request_pins"] == {"max_tokens": 500}
    row.get_by_role("button", name="Edit").click()
    expect(pins).to_have_value('{"max_tokens":500}')
    pins.fill("")
    alice.get_by_role("button", name="Save").click()
    expect(alice.locator("#profile-form")).to_be_hidden()
    expect(row).not_to_contain_text("pinned:")
