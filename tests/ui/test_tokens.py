"""API tokens on the Models page: a user makes one for a program (the secret shown once),
the program uses it, and Revoke stops it — no administrator and no command line needed."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from playwright.sync_api import expect
from tests.ui.harness import Server

pytestmark = pytest.mark.browser


def test_a_user_makes_a_token_uses_it_and_revokes_it(alice: Any, server: Server) -> None:
    alice.goto(server.url + "/profiles")
    tokens = alice.locator("#tokens-section")
    expect(tokens.get_by_role("heading", name="API tokens")).to_be_visible()
    tokens.get_by_label("What it is for").fill("laptop")
    tokens.get_by_role("button", name="Create a token").click()
    expect(tokens.get_by_role("status")).to_contain_text("Copy it now")
    secret = tokens.locator("#token-secret").inner_text()
    assert secret.startswith("cm_")
    item = tokens.locator(".token-item", has_text="laptop")
    expect(item).to_contain_text("never used")
    me = httpx.get(server.url + "/api/v1/me", headers={"Authorization": f"Bearer {secret}"})
    assert me.status_code == 200 and me.json()["name"] == "alice"

    alice.once("dialog", lambda dialog: dialog.accept())
    item.get_by_role("button", name="Revoke the token “laptop”").click()
    expect(item).to_have_count(0)
    gone = httpx.get(server.url + "/api/v1/me", headers={"Authorization": f"Bearer {secret}"})
    assert gone.status_code == 401
    alice.reload()
    expect(alice.locator("#tokens-section")).not_to_contain_text(secret)
