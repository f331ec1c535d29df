"""SEC-1 over HTTP: every JSON body of the API is bounded before a route parses it — depth,
string length, items, numbers, Unicode — with ``invalid_input`` naming what and where, the
same on SQLite and PostgreSQL, and nothing written."""

from __future__ import annotations

import time

import pytest
from fastapi.testclient import TestClient
from tests.support.app import make_user

from chatmem.settings import Settings
from chatmem.web.app import create_app

JSON = {"Content-Type": "application/json"}


def _client(settings: Settings, **overrides: object) -> TestClient:
    return TestClient(create_app(settings.model_copy(update=overrides)))


def _nested(depth: int) -> bytes:
    return b'{"title":"t","instructions":' + b"[" * depth + b"]" * depth + b"}"


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        (_nested(200_000), "deeper than 64"),
        (b'{"title":' + b"[" * 65 + b"]" * 65 + b"}", "deeper than 64"),
        (b'{"title":' + b'{"a":' * 70 + b"1" + b"}" * 70 + b"}", "deeper than 64"),
        (b'{"title":"t","pinned":1e999}', "pinned: numbers must be finite"),
        (b'{"title":"t","pinned":-Infinity}', "pinned: numbers must be finite"),
        (b'{"title":"t","pinned":NaN}', "pinned: numbers must be finite"),
        (b'{"title":"t","pinned":99999999999999999999}', "pinned: the number is out of range"),
        (b'{"title":"t","pinned":' + b"9" * 5000 + b"}", "pinned: the number is out of range"),
        (b'{"title":"a\\u0000b"}', "title: text must not contain NUL"),
        (b'{"title":"\\ud800"}', "title: text must be valid Unicode"),
        (b'{"title":"ok","x\\u0000":1}', "must not contain NUL"),
        (b'{"title":["\\udfff"]}', "title[0]: text must be valid Unicode"),
    ],
)
def test_hostile_bodies_are_refused_before_the_route_parses_them(
    client: TestClient, body: bytes, needle: str
) -> None:
    user = make_user(client, "alice")
    started = time.perf_counter()
    response = client.post("/api/v1/conversations", content=body, headers={**user.headers, **JSON})
    assert time.perf_counter() - started < 2
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error["code"] == "invalid_input" and needle in error["message"], error
    assert client.get("/api/v1/conversations", headers=user.headers).json()["items"] == []


def test_nesting_up_to_the_limit_reaches_the_route(client: TestClient) -> None:
    """63 levels inside the body object pass the bounds; the route then judges the shape."""
    user = make_user(client, "alice")
    response = client.post(
        "/api/v1/conversations",
        content=b'{"title":' + b"[" * 63 + b"]" * 63 + b"}",
        headers={**user.headers, **JSON},
    )
    assert response.status_code == 422
    assert "deeper" not in response.json()["error"]["message"]


def test_limits_follow_the_settings(settings: Settings) -> None:
    with _client(settings, max_json_depth=4, max_string_bytes=1024, max_json_items=10) as client:
        user = make_user(client, "alice")
        h = {**user.headers, **JSON}
        deep = client.post("/api/v1/conversations", content=b'{"title":[[[[]]]]}', headers=h)
        assert deep.status_code == 422 and "deeper than 4" in deep.text
        long = client.post(
            "/api/v1/conversations", content=b'{"title":"' + b"x" * 1100 + b'"}', headers=h
        )
        assert long.status_code == 422 and "longer than 1 KB" in long.text
        items = client.post(
            "/api/v1/conversations", content=b'{"title":[' + b"1," * 11 + b"1]}", headers=h
        )
        assert items.status_code == 422 and "more than 10 items" in items.text
        fine = client.post("/api/v1/conversations", content=b'{"title":"x"}', headers=h)
        assert fine.status_code == 201
        assert len(client.get("/api/v1/conversations", headers=user.headers).json()["items"]) == 1


def test_broken_json_and_other_content_types_are_still_the_routes_business(
    client: TestClient,
) -> None:
    user = make_user(client, "alice")
    broken = client.post(
        "/api/v1/conversations", content=b'{"title": "x"', headers={**user.headers, **JSON}
    )
    assert broken.status_code in (400, 422)
    assert broken.json()["error"]["code"] == "invalid_input"
    typed = client.post(
        "/api/v1/conversations",
        content=b'{"title":"t"}',
        headers={**user.headers, "Content-Type": "application/vnd.chatmem+json"},
    )
    assert typed.status_code == 201, typed.text
    deep_typed = client.post(
        "/api/v1/conversations",
        content=_nested(100),
        headers={**user.headers, "Content-Type": "application/merge-patch+json"},
    )
    assert deep_typed.status_code == 422 and "deeper" in deep_typed.text


def test_the_size_cap_still_comes_first(settings: Settings) -> None:
    with _client(settings, max_body_bytes=1000) as client:
        user = make_user(client, "alice")

        def chunks():  # no Content-Length: the cap counts as the bounds read
            for _ in range(10):
                yield b'{"title": "' + b"y" * 200

        response = client.post(
            "/api/v1/conversations", content=chunks(), headers={**user.headers, **JSON}
        )
        assert response.status_code == 413
        assert response.json()["error"]["code"] == "payload_too_large"
