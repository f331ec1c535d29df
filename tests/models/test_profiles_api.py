"""PROF-1 … PROF-4 through the HTTP API: profiles, shared profiles, write-only keys, SSRF."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from tests.support.app import ApiUser, make_user
from tests.support.model_server import FakeModelServer

from chatmem.errors import InvalidInput
from chatmem.models import profiles
from chatmem.security.endpoints import EndpointPolicy, StaticResolver
from chatmem.settings import Settings
from chatmem.store.tables.accounts import User
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
    assert listed[0]["owned"] is False and listed[0]["editable"] is False
    assert "has_api_key" not in listed[0] and "base_url" not in listed[0]  # SEC-4
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


# --- memory knobs (CTX-22) ------------------------------------------------------------------------

KNOB_DEFAULTS = {
    "economy_pairs": 3,
    "economy_batch": 4,
    "full_threshold_fraction": 0.8,
    "full_threshold_cap": 200_000,
    "full_keep_messages": 20,
    "window_messages": 12,
    "window_chars": 8_000,
    "instructions_role": "system",
}
KNOBS_SET = {
    "economy_pairs": 0,
    "economy_batch": 100,
    "full_threshold_fraction": 0.5,
    "full_threshold_cap": 1_000,
    "full_keep_messages": 1_000,
    "window_messages": 1,
    "window_chars": 1_000_000,
    "instructions_role": "user",
}
INVALID_KNOBS = [
    ("economy_pairs", -1),
    ("economy_pairs", 101),
    ("economy_pairs", 2.5),
    ("economy_pairs", True),
    ("economy_pairs", "3"),
    ("economy_batch", 0),
    ("economy_batch", 101),
    ("full_threshold_fraction", 0.09),
    ("full_threshold_fraction", 1.01),
    ("full_threshold_fraction", "0.5"),
    ("full_threshold_cap", 999),
    ("full_threshold_cap", 1_000_001),
    ("full_keep_messages", -1),
    ("full_keep_messages", 1_001),
    ("window_messages", 0),
    ("window_messages", 1_001),
    ("window_chars", 99),
    ("window_chars", 1_000_001),
    ("answer_reserve", -1),
    ("answer_reserve", 4_097),  # more than half of an 8,192 window
    ("answer_reserve", 1.5),
    ("instructions_role", "assistant"),
    ("instructions_role", "System"),
]


def test_a_new_profile_has_the_engine_defaults_and_an_automatic_reserve(
    api: TestClient, alice: ApiUser
) -> None:
    """CTX-22: an 8,192-token window reserves an eighth (1,024), not half of it."""
    small = create(api, alice, context_window=8_192)
    assert small["answer_reserve"] == 1_024 and small["answer_reserve_auto"] is True
    assert {k: small[k] for k in KNOB_DEFAULTS} == KNOB_DEFAULTS
    assert create(api, alice)["answer_reserve"] == 4_096  # 32,768 / 8, the cap
    # The automatic reserve follows the window.
    bigger = api.patch(
        f"/api/v1/profiles/{small['id']}", json={"context_window": 16_384}, headers=alice.headers
    ).json()
    assert bigger["answer_reserve"] == 2_048 and bigger["answer_reserve_auto"] is True


@SQLITE_ONLY
def test_every_knob_round_trips_and_null_returns_it_to_the_default(
    api: TestClient, alice: ApiUser
) -> None:
    created = create(api, alice, context_window=8_192, answer_reserve=4_096, **KNOBS_SET)
    assert {k: created[k] for k in KNOBS_SET} == KNOBS_SET
    assert created["answer_reserve"] == 4_096 and created["answer_reserve_auto"] is False
    url = f"/api/v1/profiles/{created['id']}"
    assert api.get(url, headers=alice.headers).json() == created
    # A change to one knob leaves the others alone.
    changed = api.patch(url, json={"window_chars": 500}, headers=alice.headers).json()
    assert changed["window_chars"] == 500 and changed["economy_batch"] == 100
    assert changed["answer_reserve"] == 4_096
    # An integer fraction is a number like any other.
    assert (
        api.patch(url, json={"full_threshold_fraction": 1}, headers=alice.headers).json()[
            "full_threshold_fraction"
        ]
        == 1.0
    )
    # null: back to the defaults, the reserve automatic again.
    reset = {k: None for k in (*KNOB_DEFAULTS, "answer_reserve")}
    back = api.patch(url, json=reset, headers=alice.headers).json()
    assert {k: back[k] for k in KNOB_DEFAULTS} == KNOB_DEFAULTS
    assert back["answer_reserve"] == 1_024 and back["answer_reserve_auto"] is True
    with api.app.state.db.session() as session:  # type: ignore[attr-defined]
        row = session.get(ModelProfile, created["id"])
        assert row is not None
        assert [getattr(row, k) for k in reset] == [None] * len(reset)


@SQLITE_ONLY
def test_invalid_knobs_are_refused_and_change_nothing(api: TestClient, alice: ApiUser) -> None:
    created = create(api, alice, context_window=8_192)
    url = f"/api/v1/profiles/{created['id']}"
    for name, value in INVALID_KNOBS:
        response = api.post(
            "/api/v1/profiles",
            json=body(context_window=8_192, **{name: value}),
            headers=alice.headers,
        )
        assert response.status_code == 422, (name, value, response.text)
        error = response.json()["error"]
        assert error["code"] == "invalid_input" and name in error["message"], error
        patched = api.patch(url, json={name: value}, headers=alice.headers)
        assert patched.status_code == 422, (name, value, patched.text)
        assert patched.json()["error"]["code"] == "invalid_input"
        assert name in patched.json()["error"]["message"]
    assert api.get(url, headers=alice.headers).json() == created
    assert len(api.get("/api/v1/profiles", headers=alice.headers).json()["items"]) == 1


@SQLITE_ONLY
def test_non_finite_fraction_is_refused(api: TestClient, alice: ApiUser) -> None:
    for raw in ("NaN", "Infinity"):
        response = api.post(
            "/api/v1/profiles",
            content=f'{{"name": "n", "base_url": "https://api.model.test/v1", "model": "m", '
            f'"full_threshold_fraction": {raw}}}',
            headers={**alice.headers, "content-type": "application/json"},
        )
        assert response.status_code in (400, 422), response.text
        assert response.json()["error"]["code"] == "invalid_input"


@SQLITE_ONLY
def test_answer_reserve_is_checked_against_the_new_window(api: TestClient, alice: ApiUser) -> None:
    """Shrinking the window refuses a reserve above half of it; the automatic one follows."""
    pid = create(api, alice, context_window=32_768, answer_reserve=10_000)["id"]
    url = f"/api/v1/profiles/{pid}"
    refused = api.patch(url, json={"context_window": 8_192}, headers=alice.headers)
    assert refused.status_code == 422
    assert "answer_reserve" in refused.json()["error"]["message"]
    assert api.get(url, headers=alice.headers).json()["context_window"] == 32_768
    both = api.patch(
        url, json={"context_window": 8_192, "answer_reserve": None}, headers=alice.headers
    ).json()
    assert (both["context_window"], both["answer_reserve"], both["answer_reserve_auto"]) == (
        8_192,
        1_024,
        True,
    )


@SQLITE_ONLY
@pytest.mark.parametrize(
    ("name", "value"), [(n, v) for n, v in INVALID_KNOBS if n != "answer_reserve"]
)
def test_the_repository_checks_knobs_for_callers_other_than_the_api(
    api: TestClient, alice: ApiUser, name: str, value: Any
) -> None:
    """The profiles room refuses what the API schema would (naming the field), before any
    change reaches the row."""
    pid = create(api, alice)["id"]
    state = api.app.state  # type: ignore[attr-defined]
    with state.db.session() as session:
        row = session.get(ModelProfile, pid)
        user = session.get(User, row.user_id)
        with pytest.raises(InvalidInput, match=name):
            profiles.update_profile(
                session, user, row, state.secrets, state.endpoint_policy, {name: value}
            )
        assert getattr(row, name) is None
