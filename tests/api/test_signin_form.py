"""Signing in without the page's script: the sign-in form posts itself to ``POST /signin``
(a visitor pressing Enter before ``signin.js`` ran used to send ``GET /signin?name=…&password=…``,
the password in a URL, the access log and the browser's history), and the one-time link's
page when the link is spent."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from tests.support.app import make_user

from chatmem.auth.throttle import MemoryThrottle, ThrottlePolicy
from chatmem.settings import Settings
from chatmem.web.app import create_app

pytestmark = pytest.mark.parametrize("backend", ["sqlite"])  # pages know no backend

PASSWORD = "correct horse battery staple"


@pytest.fixture
def browser(app: FastAPI) -> Iterator[TestClient]:
    """A client that sees redirects as a browser's network log does, one by one."""
    with TestClient(app, follow_redirects=False) as client:
        make_user(client, "carol", password=PASSWORD)
        yield client


def post(client: TestClient, **fields: str) -> Any:
    headers = {"Sec-Fetch-Site": "same-origin", "Origin": "http://testserver"}
    return client.post("/signin", data=fields, headers=headers)


def error_of(html: str) -> str:
    match = re.search(r'<p id="signin-error"[^>]*>(.*?)</p>', html, re.S)
    assert match, html
    return match.group(1).strip()


def test_the_sign_in_form_posts_its_fields_not_in_a_url(browser: TestClient) -> None:
    page = browser.get("/signin?next=/profiles").text
    form = re.search(r'<form id="signin-form"[^>]*>', page)
    assert form and 'method="post"' in form.group(0) and 'action="/signin"' in form.group(0)
    assert '<input type="hidden" name="next" value="/profiles">' in page
    assert 'id="signin-error" class="form-error" role="alert" hidden' in page  # no error yet


def test_a_posted_form_signs_in_and_goes_on_to_next(browser: TestClient) -> None:
    response = post(browser, name="carol", password=PASSWORD, next="/profiles")
    assert response.status_code == 303
    assert response.headers["location"] == "/profiles"
    assert browser.get("/api/v1/me").json()["name"] == "carol"
    assert browser.get("/profiles").status_code == 200


def test_next_is_only_followed_on_this_site(browser: TestClient) -> None:
    for hostile in ("//evil.example/", "https://evil.example/", "/\\evil.example"):
        response = post(browser, name="carol", password=PASSWORD, next=hostile)
        assert response.headers["location"] == "/"


def test_a_wrong_password_shows_the_page_again_with_why(browser: TestClient) -> None:
    response = post(browser, name="carol", password="wrong", next="/profiles")
    assert response.status_code == 401
    html = response.text
    assert error_of(html) == "Wrong name or password."
    assert "wrong" not in html.replace("Wrong name", "")  # the password is not echoed
    assert '<input type="hidden" name="next" value="/profiles">' in html
    assert "chatmem_session" not in response.headers.get("set-cookie", "")
    assert browser.get("/api/v1/me").status_code == 401


def test_an_empty_field_is_named(browser: TestClient) -> None:
    response = post(browser, name="carol", password="")
    assert response.status_code == 400
    assert error_of(response.text) == "Enter your name and password."


def test_the_form_is_throttled_like_the_api(browser: TestClient) -> None:
    app: FastAPI = browser.app  # type: ignore[assignment]
    app.state.signin_throttle = MemoryThrottle(ThrottlePolicy(), clock=lambda: 1000.0)
    statuses = [post(browser, name="carol", password=f"guess {i}").status_code for i in range(41)]
    assert statuses[-1] == 429, statuses
    refused = post(browser, name="carol", password=PASSWORD)
    assert refused.status_code == 429
    assert int(refused.headers["retry-after"]) >= 1
    assert error_of(refused.text).startswith("Too many failed sign-ins")


@pytest.mark.parametrize(
    "headers",
    [
        {"Sec-Fetch-Site": "cross-site", "Origin": "https://evil.example"},
        {"Sec-Fetch-Site": "same-site", "Origin": "http://sub.testserver"},
        {"Origin": "https://evil.example"},  # an older browser: no Sec-Fetch-Site
        {"Origin": "null"},
    ],
)
def test_a_post_from_another_site_signs_nobody_in(
    browser: TestClient, headers: dict[str, str]
) -> None:
    """Login CSRF: another site's page must not sign its visitor in as somebody else."""
    form = {"name": "carol", "password": PASSWORD, "next": "/"}
    response = browser.post("/signin", data=form, headers=headers)
    assert response.status_code == 403
    assert "chatmem_session" not in response.headers.get("set-cookie", "")
    assert browser.get("/api/v1/me").status_code == 401


def test_a_spent_signin_link_shows_the_sign_in_page(
    settings: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    with TestClient(create_app(settings), follow_redirects=False) as client:
        link = re.search(r"http://127\.0\.0\.1:8000(/auth/link/\S+)", capsys.readouterr().out)
        assert link
        assert client.get(link.group(1)).status_code == 303
        client.cookies.clear()
        browser = {"Accept": "text/html,application/xhtml+xml,*/*;q=0.8"}
        again = client.get(link.group(1), headers=browser)
        assert again.status_code == 404
        assert again.headers["content-type"].startswith("text/html")
        assert error_of(again.text).startswith("This sign-in link was already used or has expired.")
        unknown = client.get("/auth/link/not-a-link", headers=browser)
        assert unknown.status_code == 404 and "already used or has expired" in unknown.text
        # Any other client gets the API's error, as before.
        scripted = client.get(link.group(1))
        assert scripted.status_code == 404 and scripted.json()["error"]["code"] == "not_found"
