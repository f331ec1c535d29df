"""The colour theme a user chooses (system, light, dark): kept on the server, rendered on
``<html data-theme>`` before the first paint, left off for ``system``."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient
from tests.support.app import make_user


def test_me_sets_the_theme_and_keeps_the_language(client: TestClient) -> None:
    user = make_user(client, "olga")
    assert client.get("/api/v1/me", headers=user.headers).json()["theme"] == "system"
    client.patch("/api/v1/me", json={"locale": "ru"}, headers=user.headers)
    changed = client.patch("/api/v1/me", json={"theme": "dark"}, headers=user.headers)
    assert changed.status_code == 200
    assert changed.json()["theme"] == "dark"
    assert changed.json()["locale"] == "ru"  # a field left out is kept
    relocated = client.patch("/api/v1/me", json={"locale": "it"}, headers=user.headers)
    assert relocated.json()["theme"] == "dark"
    back = client.patch("/api/v1/me", json={"theme": "system"}, headers=user.headers)
    assert back.json()["theme"] == "system"
    assert client.get("/api/v1/me", headers=user.headers).json()["theme"] == "system"


@pytest.mark.parametrize(
    "bad", [{"theme": "blue"}, {"theme": None}, {"theme": 1}, {"theme": "Dark"}, {}]
)
def test_me_refuses_an_unknown_theme(client: TestClient, bad: dict[str, object]) -> None:
    user = make_user(client, "olga")
    client.patch("/api/v1/me", json={"theme": "light"}, headers=user.headers)
    response = client.patch("/api/v1/me", json=bad, headers=user.headers)
    assert response.status_code == 422
    assert response.json()["error"]["code"] == "invalid_input"
    assert client.get("/api/v1/me", headers=user.headers).json()["theme"] == "light"


def test_the_page_carries_the_theme_before_first_paint(client: TestClient) -> None:
    make_user(client, "olga", password="a long enough password")
    signin = client.get("/")
    assert "data-theme" not in signin.text.split(">", 2)[1]  # nobody signed in: the system's
    login = client.post(
        "/api/v1/auth/login", json={"name": "olga", "password": "a long enough password"}
    )
    csrf = {"X-CSRF-Token": login.json()["csrf_token"]}
    assert '<html lang="en">' in client.get("/").text  # system: the media query decides
    client.patch("/api/v1/me", json={"theme": "dark"}, headers=csrf)
    assert '<html lang="en" data-theme="dark">' in client.get("/").text
    assert '<html lang="en" data-theme="dark">' in client.get("/profiles").text
    client.patch("/api/v1/me", json={"theme": "light"}, headers=csrf)
    page = client.get("/").text
    assert '<html lang="en" data-theme="light">' in page
    assert '<option value="light" selected>' in page
