"""PROJ-4: the interface language — the user's setting over the browser's, and the catalogs."""

from __future__ import annotations

import re

import pytest
from fastapi.testclient import TestClient
from tests.support.app import make_user

from chatmem.web import i18n
from chatmem.web.ui.routes import router as ui_router


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        (None, None),
        ("", None),
        ("ru-RU,ru;q=0.9,en-US;q=0.8,en;q=0.7", "ru"),
        ("it-IT", "it"),
        ("id", "id"),
        ("in-ID", "id"),  # Indonesian's old code
        ("de-DE,de;q=0.9,it;q=0.5,ru;q=0.6", "ru"),  # the highest q among ours
        ("de, fr;q=0.8", None),
        ("ru;q=0, it;q=0.1", "it"),  # q=0 means "not this one"
        ("ru;q=abc, en;q=0.5", "en"),
        ("*", None),
    ],
)
def test_accept_language_picks_the_best_of_our_languages(
    header: str | None, expected: str | None
) -> None:
    assert i18n.from_accept_language(header) == expected


def test_the_user_setting_wins_over_the_browser() -> None:
    assert i18n.choose("id", "ru-RU,ru").code == "id"
    assert i18n.choose(None, "ru-RU,ru").code == "ru"
    assert i18n.choose("xx", "it").code == "it"  # an unknown stored value is ignored
    assert i18n.choose(None, None).code == "en"


def test_plurals_and_numbers_follow_the_language() -> None:
    ru = i18n.languages()["ru"]
    assert ru.number(1234) == "1\xa0234"
    assert ru.compact(45000) == "45\xa0тыс."
    assert i18n.languages()["en"].number(1234) == "1,234"
    assert i18n.languages()["en"].compact(45000) == "45K"
    # Rounded as the browser's Intl compact format rounds the counter.
    assert i18n.languages()["en"].compact(32768) == "33K"
    assert ru.compact(1500) == "1,5\xa0тыс."
    assert ru.compact(1_000_000) == "1\xa0млн"
    assert i18n.languages()["it"].number(1234) == "1.234"
    assert i18n.languages()["id"].compact(45000) == "45\xa0rb"


def test_a_russian_plural_reaches_the_browser_keyed_by_cldr_category() -> None:
    """The browser picks a form with Intl.PluralRules: "one", "few", "many"."""
    catalog = i18n.languages()["ru"].browser_catalog
    plurals = [forms for forms in catalog.values() if isinstance(forms, dict)]
    assert plurals, "the Russian catalog has plurals"
    assert all({"one", "few", "many"} <= set(forms) for forms in plurals)


def test_me_sets_the_interface_language(client: TestClient) -> None:
    user = make_user(client, "olga")
    assert client.get("/api/v1/me", headers=user.headers).json()["locale"] is None
    changed = client.patch("/api/v1/me", json={"locale": "ru"}, headers=user.headers)
    assert changed.status_code == 200
    assert changed.json()["locale"] == "ru"
    assert client.get("/api/v1/me", headers=user.headers).json()["locale"] == "ru"
    cleared = client.patch("/api/v1/me", json={"locale": None}, headers=user.headers)
    assert cleared.json()["locale"] is None


@pytest.mark.parametrize("bad", [{"locale": "de"}, {"locale": 7}, {"locale": "ru", "x": 1}, {}])
def test_me_refuses_an_unknown_language(client: TestClient, bad: dict[str, object]) -> None:
    user = make_user(client, "olga")
    response = client.patch("/api/v1/me", json=bad, headers=user.headers)
    assert response.status_code == 422
    assert response.json()["error"]["code"] == "invalid_input"
    assert client.get("/api/v1/me", headers=user.headers).json()["locale"] is None


def test_pages_speak_the_browser_language_until_the_user_chooses(client: TestClient) -> None:
    page = client.get("/", headers={"Accept-Language": "ru-RU,ru;q=0.9"})
    assert '<html lang="ru">' in page.text
    make_user(client, "olga", password="a long enough password")
    login = client.post(
        "/api/v1/auth/login", json={"name": "olga", "password": "a long enough password"}
    )
    csrf = login.json()["csrf_token"]
    italian = {"Accept-Language": "it-IT,it"}
    assert '<html lang="it">' in client.get("/profiles", headers=italian).text
    client.patch("/api/v1/me", json={"locale": "id"}, headers={"X-CSRF-Token": csrf})
    page = client.get("/profiles", headers=italian)
    assert '<html lang="id">' in page.text
    assert ">Keluar<" in page.text  # "Sign out", rendered on the server
    assert "(1.024 hingga 4.096 token)" in page.text  # numbers by Babel, in the language
    chat = client.get("/", headers=italian).text
    # "Archive" the page and "Archive" the action are told apart (msgctxt "action").
    archive_item = chat.split('id="archive-chat"', 1)[1].split("</button>", 1)[0]
    assert ">Arsip</a>" in chat and '<span class="menu-label">Arsipkan</span>' in archive_item
    assert 'id="i18n-catalog"' in page.text


def _page_paths() -> list[str]:
    """Every HTML page of the UI: the GET routes of its router, ids filled in."""
    paths = []
    for route in ui_router.routes:
        if "GET" in (getattr(route, "methods", None) or set()):
            paths.append(re.sub(r"\{[^}]+\}", "x", getattr(route, "path", "")))
    return paths


@pytest.mark.parametrize("lang", i18n.LOCALES)
def test_every_page_renders_in_every_language(client: TestClient, lang: str) -> None:
    """A page a user can open renders in each language, its catalog in the page."""
    make_user(client, "olga", password="a long enough password", admin=True)
    client.post("/api/v1/auth/login", json={"name": "olga", "password": "a long enough password"})
    paths = _page_paths()
    assert {"/", "/profiles", "/archive"} <= set(paths)
    for path in paths:
        headers = {"Accept-Language": lang, "Accept": "text/html"}  # as a browser asks
        page = client.get(path, headers=headers, follow_redirects=False)
        # A made-up sign-in link shows the sign-in page saying so, as a 404.
        expected = 404 if path.startswith("/auth/link/") else 200
        assert page.status_code == expected, (path, page.status_code)
        assert f'<html lang="{lang}">' in page.text, path
        assert 'id="i18n-catalog"' in page.text, path
