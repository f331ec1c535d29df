"""PROF-1 … PROF-4 through the HTTP API: profiles, shared profiles, write-only keys, SSRF."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from tests.support.app import ApiUser, make_user
from tests.support.model_server import FakeModelServer

from chatmem.models.ssrf import EndpointPolicy, StaticResolver
from chatmem.settings import Settings
from chatmem.store.tables.profiles import ModelProfile
from chatmem.web.app import create_app

KEY = "sk-live-PROFILE-KEY-7f3a9c2e5b"
# Storage-sensitive tests run on both backends; the rest once, on SQLite, to keep this file fast.
SQLITE_ONLY = pytest.mark.parametrize("backend", ["sqlite"])
PUBLIC = StaticResolver({"api.model.test": ["93.184.216.34"], "inside.test": ["10.1.2.3"]})


@pytest.fixture
def api(settings: Settings) -> Iterator[TestClient]:
    """The app with a resolver that knows a public-looking and a private name."""
    app: FastAPI = create_app(settings)
    app.state.endpoint_policy = EndpointPolicy(resolver=PUBLIC)
    with TestClient(app) as client:
        yield client


@pytest.fixture
def alice(api: TestClient) -> ApiUser:
    return make_user(api, "alice")


@pytest.fixture
def bob(api: TestClient) -> ApiUser:
    return make_user(api, "bob")


@pytest.fixture
def admin(api: TestClient) -> ApiUser:
    return make_user(api, "root", admin=True)


def body(**extra: Any) -> dict[str, Any]:
    return {"name": "GPT", "base_url": "https://api.model.test/v1", "model": "gpt-4o", **extra}


def create(api: TestClient, who: ApiUser, **extra: Any) -> dict[str, Any]:
    response = api.post("/api/v1/profiles", json=body(**extra), headers=who.headers)
    assert response.status_code == 201, response.text
    return response.json()


def test_create_read_list_with_defaults(api: TestClient, alice: ApiUser) -> None:
    """PROF-1: defaults (32,768 window, estimate tokenizer) and table prices for a known model."""
    created = create(api, alice, api_key=KEY)
    assert created["context_window"] == 32_768
    assert created["tokenizer"] == "estimate"
    assert created["has_api_key"] is True
    assert created["prices"]["source"] == "table" and created["prices"]["input_per_mtok"] > 0
    assert api.get(f"/api/v1/profiles/{created['id']}", headers=alice.headers).json() == created
    listed = api.get("/api/v1/profiles", headers=alice.headers).json()["items"]
    assert [p["id"] for p in listed] == [created["id"]]


@SQLITE_ONLY
def test_api_key_is_write_only_in_every_response(api: TestClient, alice: ApiUser) -> None:
    """PROF-2: create, read, list, patch and test responses never carry the key."""
    created = create(api, alice, api_key=KEY)
    pid = created["id"]
    responses = [
        api.get(f"/api/v1/profiles/{pid}", headers=alice.headers),
        api.get("/api/v1/profiles", headers=alice.headers),
        api.patch(f"/api/v1/profiles/{pid}", json={"name": "renamed"}, headers=alice.headers),
        api.post(f"/api/v1/profiles/{pid}/test", headers=alice.headers),
    ]
    assert KEY not in str(created)
    for response in responses:
        assert KEY not in response.text
        assert "api_key_ciphertext" not in response.text


def test_patch_replaces_and_removes_the_key(api: TestClient, alice: ApiUser) -> None:
    pid = create(api, alice)["id"]
    assert api.get(f"/api/v1/profiles/{pid}", headers=alice.headers).json()["has_api_key"] is False
    patched = api.patch(f"/api/v1/profiles/{pid}", json={"api_key": KEY}, headers=alice.headers)
    assert patched.json()["has_api_key"] is True
    kept = api.patch(f"/api/v1/profiles/{pid}", json={"name": "x"}, headers=alice.headers)
    assert kept.json()["has_api_key"] is True
    removed = api.patch(f"/api/v1/profiles/{pid}", json={"api_key": None}, headers=alice.headers)
    assert removed.json()["has_api_key"] is False


@SQLITE_ONLY
def test_context_window_out_of_range_is_refused_and_bounds_accepted(
    api: TestClient, alice: ApiUser
) -> None:
    """PROF-1: 8,192 … 1,000,000 tokens, on create and on change."""
    pid = create(api, alice)["id"]
    for window in (8_191, 1_000_001, 0, -5, "32768"):
        response = api.post(
            "/api/v1/profiles", json=body(context_window=window), headers=alice.headers
        )
        assert response.status_code == 422, window
        assert response.json()["error"]["code"] == "invalid_input"
        patched = api.patch(
            f"/api/v1/profiles/{pid}", json={"context_window": window}, headers=alice.headers
        )
        assert patched.status_code == 422, window
    for window in (8_192, 1_000_000):
        assert create(api, alice, context_window=window)["context_window"] == window


@SQLITE_ONLY
def test_answer_reserve_larger_than_half_the_window_is_refused(
    api: TestClient, alice: ApiUser
) -> None:
    response = api.post(
        "/api/v1/profiles",
        json=body(context_window=8192, answer_reserve=5000),
        headers=alice.headers,
    )
    assert response.status_code == 422


@SQLITE_ONLY
def test_unknown_tokenizer_is_refused(api: TestClient, alice: ApiUser) -> None:
    response = api.post("/api/v1/profiles", json=body(tokenizer="gpt2"), headers=alice.headers)
    assert response.status_code == 422


@SQLITE_ONLY
def test_prices_override_free_and_unknown(api: TestClient, alice: ApiUser) -> None:
    """PROF-1: overridable prices, free models, and unknown models reported as such."""
    over = create(api, alice, input_price_per_mtok=1.5, output_price_per_mtok=2)
    assert over["prices"] == {
        "input_per_mtok": 1.5,
        "output_per_mtok": 2.0,
        "free": False,
        "source": "override",
        "currency": "USD",
    }
    free = create(api, alice, free=True)
    assert free["prices"]["free"] is True and free["prices"]["input_per_mtok"] == 0
    unknown = create(api, alice, model="my-local-llama")
    assert unknown["prices"]["source"] == "unknown"


@SQLITE_ONLY
def test_private_profiles_of_others_answer_not_found(
    api: TestClient, alice: ApiUser, bob: ApiUser
) -> None:
    """STORE-1: another user's private profile is a missing id, for every verb."""
    pid = create(api, alice, api_key=KEY)["id"]
    assert api.get(f"/api/v1/profiles/{pid}", headers=bob.headers).status_code == 404
    assert (
        api.patch(f"/api/v1/profiles/{pid}", json={"name": "x"}, headers=bob.headers).status_code
        == 404
    )
    assert api.delete(f"/api/v1/profiles/{pid}", headers=bob.headers).status_code == 404
    assert api.post(f"/api/v1/profiles/{pid}/test", headers=bob.headers).status_code == 404
    assert api.get("/api/v1/profiles", headers=bob.headers).json()["items"] == []


def test_admins_publish_shared_profiles_visible_to_all(
    api: TestClient, admin: ApiUser, alice: ApiUser
) -> None:
    shared = create(api, admin, shared=True, api_key=KEY)
    listed = api.get("/api/v1/profiles", headers=alice.headers).json()["items"]
    assert [p["id"] for p in listed] == [shared["id"]]
    assert listed[0]["owned"] is False and listed[0]["has_api_key"] is True
    # Users may use it but not change it.
    response = api.patch(
        f"/api/v1/profiles/{shared['id']}", json={"name": "x"}, headers=alice.headers
    )
    assert response.status_code == 403
    assert api.delete(f"/api/v1/profiles/{shared['id']}", headers=alice.headers).status_code == 403


@SQLITE_ONLY
def test_only_admins_may_share(api: TestClient, alice: ApiUser) -> None:
    response = api.post("/api/v1/profiles", json=body(shared=True), headers=alice.headers)
    assert response.status_code == 403


def test_summarizer_must_be_a_visible_profile(
    api: TestClient, alice: ApiUser, bob: ApiUser
) -> None:
    cheap = create(api, alice, name="cheap", model="gpt-4o-mini")
    main = create(api, alice, summarizer_profile_id=cheap["id"])
    assert main["summarizer_profile_id"] == cheap["id"]
    response = api.post(
        "/api/v1/profiles", json=body(summarizer_profile_id=cheap["id"]), headers=bob.headers
    )
    assert response.status_code == 422
    # Deleting the summariser clears the link.
    assert api.delete(f"/api/v1/profiles/{cheap['id']}", headers=alice.headers).status_code == 204
    again = api.get(f"/api/v1/profiles/{main['id']}", headers=alice.headers).json()
    assert again["summarizer_profile_id"] is None


@SQLITE_ONLY
def test_delete(api: TestClient, alice: ApiUser) -> None:
    pid = create(api, alice)["id"]
    assert api.delete(f"/api/v1/profiles/{pid}", headers=alice.headers).status_code == 204
    assert api.get(f"/api/v1/profiles/{pid}", headers=alice.headers).status_code == 404


HOSTILE_ON_SAVE = [
    "http://api.model.test/v1",
    "https://inside.test/v1",
    "https://127.0.0.1/v1",
    "https://[::ffff:127.0.0.1]/v1",
    "https://2130706433/v1",
    "https://localhost./v1",
    "https://api.model.test@127.0.0.1/v1",
    "https://unresolvable.test/v1",
    "https://169.254.169.254/latest/",
]


@SQLITE_ONLY
def test_hostile_base_urls_are_refused_on_save(api: TestClient, alice: ApiUser) -> None:
    """PROF-4: POST and PATCH answer 400 endpoint_not_allowed and store nothing."""
    pid = create(api, alice)["id"]
    for url in HOSTILE_ON_SAVE:
        response = api.post("/api/v1/profiles", json=body(base_url=url), headers=alice.headers)
        assert response.status_code == 400, url
        assert response.json()["error"]["code"] == "endpoint_not_allowed"
        patched = api.patch(
            f"/api/v1/profiles/{pid}", json={"base_url": url}, headers=alice.headers
        )
        assert patched.status_code == 400, url
        assert patched.json()["error"]["code"] == "endpoint_not_allowed"
    stored = api.get(f"/api/v1/profiles/{pid}", headers=alice.headers).json()
    assert stored["base_url"] == "https://api.model.test/v1"
    assert len(api.get("/api/v1/profiles", headers=alice.headers).json()["items"]) == 1


# --- test connection, against the fake model server ---------------------------------------------


@pytest.fixture
def private_api(settings: Settings) -> Iterator[TestClient]:
    app = create_app(settings.model_copy(update={"allow_private_endpoints": True}))
    with TestClient(app) as client:
        yield client


@SQLITE_ONLY
def test_connection_test_succeeds_and_sends_the_key(
    private_api: TestClient, model_server: FakeModelServer
) -> None:
    user = make_user(private_api, "carol")
    created = private_api.post(
        "/api/v1/profiles",
        json=body(base_url=model_server.base_url, model="fake-model", api_key=KEY),
        headers=user.headers,
    ).json()
    result = private_api.post(f"/api/v1/profiles/{created['id']}/test", headers=user.headers).json()
    assert result["ok"] is True and result["model_listed"] is True
    assert model_server.requests[-1].headers["authorization"] == f"Bearer {KEY}"


@SQLITE_ONLY
def test_connection_test_reports_a_rejected_key(
    private_api: TestClient, model_server: FakeModelServer
) -> None:
    user = make_user(private_api, "carol")
    pid = private_api.post(
        "/api/v1/profiles",
        json=body(base_url=model_server.base_url, api_key=KEY),
        headers=user.headers,
    ).json()["id"]
    model_server.expected_api_key = "sk-the-right-one"
    result = private_api.post(f"/api/v1/profiles/{pid}/test", headers=user.headers)
    assert result.status_code == 200
    assert result.json()["ok"] is False
    assert result.json()["error"]["code"] == "provider_auth"
    assert KEY not in result.text


@SQLITE_ONLY
def test_connection_test_falls_back_to_a_completion_without_models_list(
    private_api: TestClient, model_server: FakeModelServer
) -> None:
    user = make_user(private_api, "carol")
    pid = private_api.post(
        "/api/v1/profiles", json=body(base_url=model_server.base_url), headers=user.headers
    ).json()["id"]
    model_server.models = None
    result = private_api.post(f"/api/v1/profiles/{pid}/test", headers=user.headers).json()
    assert result["ok"] is True and result["model_listed"] is None
    assert model_server.chat_requests[-1].body["max_tokens"] == 1


@SQLITE_ONLY
def test_connection_test_reports_an_unreachable_endpoint(private_api: TestClient) -> None:
    user = make_user(private_api, "carol")
    with FakeModelServer() as gone:
        url = gone.base_url
    pid = private_api.post(
        "/api/v1/profiles", json=body(base_url=url), headers=user.headers
    ).json()["id"]
    result = private_api.post(f"/api/v1/profiles/{pid}/test", headers=user.headers).json()
    assert result == {"ok": False, "error": result["error"]}
    assert result["error"]["code"] == "provider_unreachable"


def test_keys_are_ciphertext_in_the_database(api: TestClient, alice: ApiUser) -> None:
    """PROF-2: the stored column holds a versioned ciphertext, not the key."""
    pid = create(api, alice, api_key=KEY)["id"]
    with api.app.state.db.session() as session:  # type: ignore[attr-defined]
        row = session.get(ModelProfile, pid)
        assert row is not None and row.api_key_ciphertext is not None
        assert KEY.encode() not in row.api_key_ciphertext
        assert row.api_key_ciphertext[0] == 1
