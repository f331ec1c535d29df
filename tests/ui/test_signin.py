"""Signing in: the sign-in page, wrong passwords, the first-run link, signing out."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect
from tests.ui.conftest import sign_in
from tests.ui.harness import Server

pytestmark = pytest.mark.browser


def test_unauthenticated_visit_shows_sign_in_and_wrong_password_is_refused(
    page: Any, server: Server, console: Any
) -> None:
    console.allow("401")  # the browser logs the refused login response
    page.goto(server.url + "/")
    expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
    page.get_by_label("Name").fill("alice")
    page.get_by_label("Password").fill("wrong")
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("alert")).to_have_text("Wrong name or password.")
    expect(page).to_have_url(server.url + "/")


def test_sign_in_opens_the_chat_and_deep_links_survive(page: Any, server: Server) -> None:
    page.goto(server.url + "/profiles")
    expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
    page.get_by_label("Name").fill("alice")
    page.get_by_label("Password").press("End")
    page.get_by_label("Password").fill("correct horse battery staple")
    page.get_by_label("Password").press("Enter")
    expect(page.get_by_role("heading", name="Model profiles")).to_be_visible()
    page.get_by_role("link", name="Chats").click()
    expect(page.locator("#draft")).to_be_visible()
    expect(page.locator(".who")).to_have_text("alice")


def test_first_run_link_signs_in_the_administrator_once(
    page: Any, server: Server, console: Any
) -> None:
    assert server.signin_link, "the first start prints a one-time sign-in link"
    page.goto(server.signin_link)
    expect(page.locator("#draft")).to_be_visible()
    page.get_by_role("button", name="Sign out").click()
    expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
    # The link works once.
    console.allow("40[0-9]")
    response = page.goto(server.signin_link)
    assert response is not None and response.status >= 400
    page.goto(server.url + "/")
    expect(page.get_by_role("heading", name="Sign in")).to_be_visible()


def test_sign_out_ends_the_session(page: Any, server: Server) -> None:
    alice = page
    sign_in(alice, server)
    alice.get_by_role("button", name="Sign out").click()
    expect(alice.get_by_role("heading", name="Sign in")).to_be_visible()
    alice.goto(server.url + "/c/anything")
    expect(alice.get_by_role("heading", name="Sign in")).to_be_visible()


def test_signing_in_again_keeps_working(page: Any, server: Server) -> None:
    sign_in(page, server)
    expect(page.locator("#chat-title")).to_have_text("New chat")


def test_signing_in_before_the_script_runs_keeps_the_password_out_of_every_url(
    page: Any, server: Server, console: Any
) -> None:
    """Enter pressed before ``signin.js`` has run (a slow network; here it never arrives)
    posts the form itself: it used to go out as ``GET /?name=…&password=…``."""
    console.allow("ERR_FAILED|401")  # the held-back script; the refused password
    page.route("**/static/signin.js*", lambda route: route.abort())
    urls: list[str] = []
    page.on("request", lambda request: urls.append(request.url))
    page.goto(server.url + "/profiles")
    expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
    page.get_by_label("Name").fill("alice")
    page.get_by_label("Password").fill("wrong horse")
    page.get_by_label("Password").press("Enter")
    expect(page.get_by_role("alert")).to_have_text("Wrong name or password.")
    page.get_by_label("Name").fill("alice")
    page.get_by_label("Password").fill("correct horse battery staple")
    page.get_by_label("Password").press("Enter")
    expect(page.get_by_role("heading", name="Model profiles")).to_be_visible()
    assert urls and not [url for url in urls if "horse" in url or "password" in url], urls
