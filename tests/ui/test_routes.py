"""The HTML pages without a browser: who gets the sign-in page, redirects that keep the
deep link (and never leave the site), and the fixed UI wording each page carries.  Runs
everywhere, also where Chromium is missing."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from tests.support.app import make_user

from chatmem.settings import Settings
from chatmem.web.app import create_app

PASSWORD = "a long enough password"


@pytest.fixture
def web(tmp_path: Path) -> Iterator[TestClient]:
    with TestClient(create_app(Settings(state_dir=tmp_path / "state"))) as client:
        yield client


def _sign_in(web: TestClient) -> None:
    make_user(web, "alice", password=PASSWORD)
    web.post("/api/v1/auth/login", json={"name": "alice", "password": PASSWORD}).raise_for_status()


def test_signed_out_visitors_get_the_sign_in_page(web: TestClient) -> None:
    page = web.get("/")
    assert page.status_code == 200
    assert "<h1>Sign in</h1>" in page.text
    assert 'id="draft"' not in page.text


@pytest.mark.parametrize("path", ["/c/abc", "/profiles", "/archive", "/archive/xyz"])
def test_deep_links_redirect_to_sign_in_and_come_back(web: TestClient, path: str) -> None:
    page = web.get(path, follow_redirects=False)
    assert page.status_code == 303
    assert page.headers["location"] == f"/?next={path}"
    _sign_in(web)
    back = web.get(f"/?next={path}", follow_redirects=False)
    assert back.status_code == 303 and back.headers["location"] == path


@pytest.mark.parametrize("target", ["//evil.example/", "https://evil.example/", "evil"])
def test_next_never_leaves_the_site(web: TestClient, target: str) -> None:
    _sign_in(web)
    page = web.get("/", params={"next": target}, follow_redirects=False)
    assert page.status_code == 200  # the chat itself, no redirect
    assert 'id="draft"' in page.text


def test_chat_page_carries_the_memory_wording(web: TestClient) -> None:
    _sign_in(web)
    html = web.get("/c/anything").text
    for text in (
        "Conversation context",
        "Memory mode",
        "Economy",
        "Everything",
        "Recent messages",
        "Conversation memory",
        "This model does not remember previous messages",
        "What goes into the next request",
        "Instructions",
        "Tools",
        "Summary",
        "Messages",
        "Files",
        "Images",
        "Free",
        "Answer reserve",
        "What to emphasise — optional",
        "Compress now",
        "Show summary",
        "Out of memory",
        "Request extension",
    ):
        assert text in html, text
    assert 'data-conversation-id="anything"' in html


def test_static_assets_are_served_and_versioned(web: TestClient) -> None:
    html = web.get("/").text
    assert "/static/app.css?v=" in html
    for name in (
        "app.css",
        "api.js",
        "chat.js",
        "memory.js",
        "feed.js",
        "stream.js",
        "favicon.svg",
    ):
        assert web.get(f"/static/{name}").status_code == 200, name


def test_an_expired_session_cookie_means_signed_out(web: TestClient) -> None:
    web.cookies.set("chatmem_session", "not-a-session")
    assert "<h1>Sign in</h1>" in web.get("/").text
