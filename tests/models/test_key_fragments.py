"""SEC-4: no fragment of an API key — a 4+ character prefix or suffix run, or a masked form as
providers echo them (``sk-LEAK...567890``, ``sk-…abcd``, ``sk-abc***xyz``) — is stored,
logged or shown; users of somebody else's shared profile never see its endpoint or key.

End to end through the fake provider: a turn's run error, its SSE stream, the database and
the state files, the logs, and ``POST /api/v1/profiles/{id}/test``."""

from __future__ import annotations

import base64
import logging
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient
from tests.support.app import ApiUser, make_user
from tests.support.model_server import FakeModelServer
from tests.support.runs import finished_run

from chatmem.security.redact import KeyScrubber, scrub_provider_text
from chatmem.settings import Settings
from chatmem.web.app import create_app

# Prefix and suffix chosen so that no id, timestamp or word of the app could hold a run of
# them by chance: any 4+ character run found in a text is a leak.
KEY = "sk-LEAKmnop-0a1b2c3d4e5f6a7b-wxyzQRST"
MASKED = [
    "sk-LEAK...zQRST",  # OpenAI's older form
    "sk-…QRST",
    "sk-LEA***RST",
    "sk-proj-****************************QRST",  # only the suffix is ours
    "sk-LEAKmnop-0a1b",  # a plain prefix run
    "wxyzQRST",  # a plain suffix run
]
SQLITE = pytest.mark.parametrize("backend", ["sqlite"])  # file-backed state is scanned


def fragments(secret: str = KEY) -> list[str]:
    """Every prefix and suffix run of 4+ characters (what must never be seen)."""
    return [secret[:n] for n in range(4, len(secret) + 1)] + [
        secret[-n:] for n in range(4, len(secret) + 1)
    ]


def leaks(text: str, secret: str = KEY) -> list[str]:
    return [f for f in fragments(secret) if f in text]


# --- the scrubber ----------------------------------------------------------------------------


@pytest.mark.parametrize("form", MASKED)
def test_masked_forms_and_runs_are_scrubbed(form: str) -> None:
    text = f"Incorrect API key provided: {form}. Find your key at https://x.test/keys."
    scrubbed = KeyScrubber(KEY).scrub(text)
    assert leaks(scrubbed) == [] and "LEA" not in scrubbed and "RST" not in scrubbed
    assert scrubbed.startswith("Incorrect API key provided: ***")
    assert scrubbed.endswith(". Find your key at https://x.test/keys.")


def test_the_whole_key_and_inner_runs_are_scrubbed_and_other_text_kept() -> None:
    assert KeyScrubber(KEY).scrub(f"key={KEY}!") == "key=***!"
    assert KeyScrubber(KEY).scrub("middle 0a1b2c3d4e5f here") == "middle *** here"
    kept = "Loading... the model sk-other...abcd is busy; retry in 3s"
    assert KeyScrubber(KEY).scrub(kept) == kept


# Issue 25: the key echoed in other forms than its own (each derived from KEY).
_RAW = KEY.encode()
ECHOED = {
    "upper-case": KEY.upper(),
    "lower-case": KEY.lower(),
    "reversed": KEY[::-1],
    "spaced": " ".join(KEY),
    "split over lines": KEY[:12] + "\n  " + KEY[12:],
    "hex": _RAW.hex(),
    "hex, upper-case": _RAW.hex().upper(),
    "base64": base64.b64encode(_RAW).decode(),
    "base64 of Basic auth": base64.b64encode(b"user:" + _RAW).decode(),
    "base64 of a header": base64.b64encode(b"Authorization: Bearer " + _RAW).decode(),
    "URL-safe base64, misaligned": base64.urlsafe_b64encode(b"\xff\xfe" + _RAW).decode(),
}


def echoed_leaks(text: str) -> list[str]:
    """Which of the key's other forms still show a run of 8 characters in ``text``."""
    squeezed = "".join(text.split()).lower()
    found = []
    for name, form in ECHOED.items():
        plain = "".join(form.split()).lower()
        if name.startswith(("base64", "URL-safe")):  # the key's own bits: past a prefix
            plain = plain[len(plain) // 3 : -4]
        if any(plain[i : i + 8] in squeezed for i in range(len(plain) - 7)):
            found.append(name)
    return found


@pytest.mark.parametrize("name", list(ECHOED))
def test_the_key_echoed_in_another_form_is_scrubbed(name: str) -> None:
    text = f"Rejected credentials {ECHOED[name]} (see https://x.test/keys)."
    scrubbed = KeyScrubber(KEY).scrub(text)
    assert echoed_leaks(scrubbed) == [] and leaks(scrubbed) == [], scrubbed
    assert scrubbed.startswith("Rejected credentials ")
    assert scrubbed.endswith(" (see https://x.test/keys).")


def test_the_other_forms_spare_ordinary_text() -> None:
    kept = (
        "Rate limit reached for gpt-4o-mini in organization org-abc on tokens per min. "
        "Limit 30000, Used 29000. Visit https://platform.openai.com/account/rate-limits "
        "ZGF0YTpkYXRh 6b65792d6e6f74"
    )
    assert KeyScrubber(KEY).scrub(kept) == kept


def test_provider_text_is_bounded_and_can_conceal_the_endpoint() -> None:
    text = "POST https://gw.corp.test/v1/chat/completions failed: GW.CORP.TEST down " + "x" * 9000
    out = scrub_provider_text(
        text, KeyScrubber(KEY), conceal_url="https://gw.corp.test/v1", host="gw.corp.test"
    )
    assert "gw.corp" not in out.lower() and len(out) <= 500
    assert out.startswith("POST the model API/chat/completions failed: the model API down")


# --- end to end ----------------------------------------------------------------------------


@pytest.fixture
def api(settings: Settings) -> Iterator[TestClient]:
    app = create_app(settings.model_copy(update={"allow_private_endpoints": True}))
    with TestClient(app) as client:
        yield client


def _shared_profile(api: TestClient, admin: ApiUser, model_server: FakeModelServer) -> str:
    response = api.post(
        "/api/v1/profiles",
        json={
            "name": "team model",
            "base_url": model_server.base_url,
            "model": "fake-model",
            "api_key": KEY,
            "shared": True,
        },
        headers=admin.headers,
    )
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


def _failing_turn(
    api: TestClient, user: ApiUser, profile_id: str, model_server: FakeModelServer, echo: str
) -> list[str]:
    """One turn the provider refuses with ``echo`` in its error; everything the user saw."""
    conversation = api.post(
        "/api/v1/conversations",
        json={"title": "t", "profile_id": profile_id},
        headers=user.headers,
    )
    assert conversation.status_code == 201, conversation.text
    cid = conversation.json()["id"]
    model_server.error(
        401,
        {
            "error": {
                "message": f"Incorrect API key provided: {echo}. Sent to {model_server.base_url}.",
                "type": "invalid_request_error",
                "code": "invalid_api_key",
            }
        },
    )
    started = api.post(
        f"/api/v1/conversations/{cid}/turns", json={"content": "hello"}, headers=user.headers
    )
    assert started.status_code == 202, started.text
    run_id = started.json()["run_id"]
    run = finished_run(api, run_id, user.headers)
    assert run["status"] == "failed", run
    events = api.get(f"/api/v1/runs/{run_id}/events", headers=user.headers)
    assert "event: error" in events.text
    seen = [str(run), events.text]
    for path in (
        f"/api/v1/conversations/{cid}",
        f"/api/v1/conversations/{cid}/messages",
        "/api/v1/profiles",
        f"/api/v1/profiles/{profile_id}",
    ):
        seen.append(api.get(path, headers=user.headers).text)
    return seen


@SQLITE
def test_masked_key_echoes_leak_nowhere_through_a_turn(
    api: TestClient,
    model_server: FakeModelServer,
    caplog: pytest.LogCaptureFixture,
    settings: Settings,
) -> None:
    caplog.set_level(logging.DEBUG)
    admin = make_user(api, "root", admin=True)
    alice = make_user(api, "alice")
    profile_id = _shared_profile(api, admin, model_server)

    seen: list[str] = []
    for user, echo in (
        (admin, "sk-LEAK...zQRST"),
        (alice, "sk-LEA***RST"),
        (alice, "sk-…QRST"),
        *((alice, form) for form in ECHOED.values()),
    ):
        seen += _failing_turn(api, user, profile_id, model_server, echo)

    assert [leaks(text) for text in seen if leaks(text)] == []
    assert [echoed_leaks(text) for text in seen if echoed_leaks(text)] == []
    assert all("LEA***" not in t and "…QRST" not in t for t in seen)
    assert leaks(caplog.text) == []
    for path in settings.state_dir.rglob("*"):
        if path.is_file() and path.name != "secret.key":
            data = path.read_bytes()
            assert [f for f in fragments() if f.encode() in data] == [], path
    # The run error is still useful: it says what went wrong.
    assert any("Incorrect API key provided: ***" in text for text in seen)


@SQLITE
def test_a_shared_profile_shows_other_users_neither_endpoint_nor_key(
    api: TestClient, model_server: FakeModelServer
) -> None:
    admin = make_user(api, "root", admin=True)
    alice = make_user(api, "alice")
    profile_id = _shared_profile(api, admin, model_server)
    host = model_server.base_url.split("//", 1)[1].split("/", 1)[0]

    listed = api.get("/api/v1/profiles", headers=alice.headers).json()["items"]
    one = api.get(f"/api/v1/profiles/{profile_id}", headers=alice.headers).json()
    for view in (listed[0], one):
        assert view["name"] == "team model" and view["model"] == "fake-model"
        assert view["owned"] is False and view["editable"] is False
        for hidden in ("base_url", "has_api_key", "summarizer_profile_id", "economy_pairs"):
            assert hidden not in view, hidden
        assert host not in str(view)
    # The administrator (who may edit it) still sees all of it.
    full = api.get(f"/api/v1/profiles/{profile_id}", headers=admin.headers).json()
    assert full["base_url"] == model_server.base_url and full["has_api_key"] is True

    # A failing turn on it: the error names neither the key nor the endpoint.
    seen = _failing_turn(api, alice, profile_id, model_server, "sk-LEAK...zQRST")
    assert [t for t in seen if host in t or model_server.base_url in t] == []
    assert [leaks(text) for text in seen if leaks(text)] == []


@SQLITE
def test_connection_test_answers_carry_no_key_fragment(
    api: TestClient, model_server: FakeModelServer
) -> None:
    admin = make_user(api, "root", admin=True)
    alice = make_user(api, "alice")
    profile_id = _shared_profile(api, admin, model_server)
    host = model_server.base_url.split("//", 1)[1].split("/", 1)[0]
    # The provider refuses our key and echoes it masked, OpenAI style ("sk-***QRST").
    model_server.expected_api_key = "sk-some-other-key"
    for user in (admin, alice):
        response = api.post(f"/api/v1/profiles/{profile_id}/test", headers=user.headers)
        assert response.status_code == 200, response.text
        body = response.json()
        assert body["ok"] is False and body["error"]["code"] == "provider_auth"
        assert leaks(response.text) == [] and "***QRST" not in response.text
        assert "Incorrect API key provided: ***" in body["error"]["message"]
    # An echo of the masked key through the completion fallback (no /models on this API).
    model_server.expected_api_key = None
    model_server.models = None
    model_server.error(
        401,
        {"error": {"message": f"bad key sk-LEA***RST for {model_server.base_url}"}},
    )
    response = api.post(f"/api/v1/profiles/{profile_id}/test", headers=alice.headers)
    assert response.json()["ok"] is False
    assert leaks(response.text) == [] and "LEA***" not in response.text
    assert host not in response.text
