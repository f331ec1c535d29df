"""Conversations and model profiles: visibility (STORE-1), tokenizer columns (CTX-2), CTX-7."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from tests.support.app import ApiUser, make_user

from chatmem.settings import Settings
from chatmem.web.app import create_app


@pytest.fixture
def api(settings: Settings) -> Iterator[TestClient]:
    # A loopback endpoint is never contacted here; allowing it keeps the test offline.
    with TestClient(create_app(settings.model_copy(update={"allow_private_endpoints": True}))) as c:
        yield c


def _profile(api: TestClient, who: ApiUser, **extra: Any) -> str:
    body = {"name": "P", "base_url": "http://127.0.0.1:9/v1", "model": "m", **extra}
    response = api.post("/api/v1/profiles", json=body, headers=who.headers)
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


def test_conversation_uses_its_profiles_tokenizer_for_cached_counts(api: TestClient) -> None:
    alice = make_user(api, "alice")
    pid = _profile(api, alice, tokenizer="o200k_base")
    cid = api.post("/api/v1/conversations", json={"profile_id": pid}, headers=alice.headers).json()[
        "id"
    ]
    text = "Привет! Как дела? " * 30
    api.post(
        f"/api/v1/conversations/{cid}/messages",
        json={"role": "user", "content": text},
        headers=alice.headers,
    )
    on_o200k = api.get(f"/api/v1/conversations/{cid}/messages", headers=alice.headers).json()
    api.patch(f"/api/v1/conversations/{cid}", json={"profile_id": None}, headers=alice.headers)
    on_estimate = api.get(f"/api/v1/conversations/{cid}/messages", headers=alice.headers).json()
    assert on_o200k["items"][0]["tokens"] != on_estimate["items"][0]["tokens"]


def test_another_users_profile_cannot_be_linked(api: TestClient) -> None:
    alice, bob = make_user(api, "alice"), make_user(api, "bob")
    bobs = _profile(api, bob)
    response = api.post("/api/v1/conversations", json={"profile_id": bobs}, headers=alice.headers)
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"


def test_ctx7_a_stateless_models_conversation_keeps_mode_off(api: TestClient) -> None:
    alice = make_user(api, "alice")
    pid = _profile(api, alice, stateless=True)
    cid = api.post(
        "/api/v1/conversations", json={"profile_id": pid, "mode": "off"}, headers=alice.headers
    ).json()["id"]
    refused = api.patch(
        f"/api/v1/conversations/{cid}", json={"mode": "full", "title": "t"}, headers=alice.headers
    )
    assert refused.status_code == 422
    assert refused.json()["error"]["code"] == "invalid_input"
    got = api.get(f"/api/v1/conversations/{cid}", headers=alice.headers).json()
    assert (got["mode"], got["title"]) == ("off", "")  # nothing of the refused PATCH stuck
