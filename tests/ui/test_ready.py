"""A button that only a script wires up cannot be clicked before the page's scripts have run
(``ready.js`` ends the page's loading state): a click there used to do nothing, silently —
on a slow page a user's, and once CI's browser test's."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect
from tests.ui.harness import Server

pytestmark = pytest.mark.browser

_HIT = """(id) => {
  const button = document.getElementById(id);
  const box = button.getBoundingClientRect();
  return document.elementFromPoint(box.x + box.width / 2, box.y + box.height / 2) === button;
}"""


def test_script_buttons_take_clicks_only_once_the_scripts_have_run(
    alice: Any, server: Server
) -> None:
    held: list[Any] = []

    def hold(route: Any) -> None:
        held.append(route)

    alice.route("**/static/api.js*", hold)  # the page's first script, held back
    with alice.expect_request("**/static/api.js*"):
        alice.goto(server.url + "/usage", wait_until="commit")
    alice.wait_for_selector("#sign-out")
    # The page is drawn once its stylesheet has arrived (a user sees nothing before); only then
    # does the question whether a click reaches the button make sense.
    alice.wait_for_function(
        "() => [...document.styleSheets].some((sheet) => (sheet.href || '').includes('/app.css'))"
    )
    assert held, "the script was not held back"
    # The button is on the page, but a click there reaches something else: nothing listens
    # to it yet.
    assert alice.evaluate(_HIT, "sign-out") is False
    held[0].continue_()
    expect(alice.locator("body")).not_to_have_attribute("data-scripts", "loading")
    assert alice.evaluate(_HIT, "sign-out") is True
    alice.get_by_role("button", name="Sign out").click()
    expect(alice.get_by_role("button", name="Sign in")).to_be_visible()
