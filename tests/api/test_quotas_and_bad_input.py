"""STORE-4 quotas over HTTP, and bad input: 4xx in the CONTRACT shape, never 500, no writes."""

from __future__ import annotations

from fastapi.testclient import TestClient
from tests.support.app import make_user

from chatmem.settings import Settings
from chatmem.web.app import create_app


def _client(settings: Settings, **overrides: object) -> TestClient:
    return TestClient(create_app(settings.model_copy(update=overrides)))


def test_store4_extension_preset_refuses_the_51st_folder(settings: Settings) -> None:
    with _client(settings, quota="extension") as client:
        user = make_user(client, "alice")
        for i in range(50):
            assert (
                client.post(
                    "/api/v1/folders", json={"name": f"f{i}"}, headers=user.headers
                ).status_code
                == 201
            )
        refused = client.post(
            "/api/v1/folders", json={"name": "one too many"}, headers=user.headers
        )
        assert refused.status_code == 409
        assert refused.json()["error"]["code"] == "quota_exceeded"
        assert len(client.get("/api/v1/folders", headers=user.headers).json()["items"]) == 50


def test_store4_conversation_eviction_keeps_pinned_and_recent_and_counts(
    settings: Settings,
) -> None:
    with _client(settings, max_conversations=3) as client:
        user = make_user(client, "alice")
        h = user.headers

        def create(title: str, pinned: bool = False) -> str:
            return client.post(
                "/api/v1/conversations", json={"title": title, "pinned": pinned}, headers=h
            ).json()["id"]

        old_pinned = create("old pinned", pinned=True)
        create("oldest")
        create("older")
        kept = create("new")
        newest = create("newest")
        listed = client.get("/api/v1/conversations", headers=h).json()
        assert [c["id"] for c in listed["items"]] == [old_pinned, newest, kept]
        assert listed["evicted"] == {"conversations": 2, "messages": 0}
        assert client.get("/api/v1/me", headers=h).json()["evicted"]["conversations"] == 2


def test_store4_message_quota_drops_the_oldest_messages(settings: Settings) -> None:
    with _client(settings, max_messages=3) as client:
        user = make_user(client, "alice")
        cid = client.post("/api/v1/conversations", json={}, headers=user.headers).json()["id"]
        for i in range(5):
            client.post(
                f"/api/v1/conversations/{cid}/messages",
                json={"role": "user" if i % 2 == 0 else "assistant", "content": f"m{i}"},
                headers=user.headers,
            )
        items = client.get(f"/api/v1/conversations/{cid}/messages", headers=user.headers).json()[
            "items"
        ]
        assert [m["content"] for m in items] == ["m2", "m3", "m4"]
        assert client.get("/api/v1/me", headers=user.headers).json()["evicted"]["messages"] == 2


def test_oversized_body_is_refused_with_413_and_writes_nothing(settings: Settings) -> None:
    with _client(settings, max_body_bytes=1000) as client:
        user = make_user(client, "alice")
        big = {"title": "x" * 2000}
        response = client.post("/api/v1/conversations", json=big, headers=user.headers)
        assert response.status_code == 413
        assert response.json()["error"]["code"] == "payload_too_large"

        def chunks():  # no Content-Length: counted as it streams
            for _ in range(10):
                yield b'{"title": "' + b"y" * 200

        streamed = client.post(
            "/api/v1/conversations",
            content=chunks(),
            headers={**user.headers, "Content-Type": "application/json"},
        )
        assert streamed.status_code == 413
        assert streamed.json()["error"]["code"] == "payload_too_large"
        assert client.get("/api/v1/conversations", headers=user.headers).json()["items"] == []


BAD_REQUESTS = [
    ("POST", "/api/v1/conversations", b"{not json"),
    ("POST", "/api/v1/conversations", b'{"title": 5}'),
    ("POST", "/api/v1/conversations", b'{"pinned": "yes"}'),
    ("POST", "/api/v1/conversations", b'{"mode": "sometimes"}'),
    ("POST", "/api/v1/conversations", b'{"unknown_field": 1}'),
    ("POST", "/api/v1/conversations", b"[]"),
    ("POST", "/api/v1/conversations", b'"\\ud800"'),
    ("POST", "/api/v1/folders", b'{"name": ""}'),
    ("POST", "/api/v1/folders", b'{"name": null}'),
    ("POST", "/api/v1/folders", b"\xff\xfe"),
    ("GET", "/api/v1/conversations?limit=0", b""),
    ("GET", "/api/v1/conversations?limit=abc", b""),
    ("GET", "/api/v1/conversations?cursor=%%%", b""),
    ("GET", "/api/v1/conversations?cursor=bm90LWpzb24", b""),
]


def test_bad_input_is_a_4xx_in_the_contract_shape_and_writes_nothing(client: TestClient) -> None:
    user = make_user(client, "alice")
    for method, path, body in BAD_REQUESTS:
        response = client.request(
            method,
            path,
            content=body or None,
            headers={**user.headers, "Content-Type": "application/json"},
        )
        assert 400 <= response.status_code < 500, (path, body, response.status_code, response.text)
        error = response.json()["error"]
        assert error["code"] == "invalid_input" and error["message"], (path, body)
    assert client.get("/api/v1/conversations", headers=user.headers).json()["items"] == []
    assert client.get("/api/v1/folders", headers=user.headers).json()["items"] == []


def test_bad_message_and_patch_bodies(client: TestClient) -> None:
    user = make_user(client, "alice")
    cid = client.post("/api/v1/conversations", json={"title": "t"}, headers=user.headers).json()[
        "id"
    ]
    for body in (
        {"role": "wizard", "content": "x"},
        {"role": "user", "content": 3},
        {"role": "assistant", "content": "", "tool_calls": [{"id": 1}]},
        {"role": "user"},
    ):
        response = client.post(
            f"/api/v1/conversations/{cid}/messages", json=body, headers=user.headers
        )
        assert response.status_code == 422, (body, response.text)
    for body in ({"pinned": None}, {"title": None}, {"mode": None}, {"folder_id": 7}):
        response = client.patch(f"/api/v1/conversations/{cid}", json=body, headers=user.headers)
        assert response.status_code in (404, 422), (body, response.text)
    got = client.get(f"/api/v1/conversations/{cid}", headers=user.headers).json()
    assert (got["title"], got["message_count"], got["pinned"]) == ("t", 0, False)
