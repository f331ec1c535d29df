"""PROF-2 end to end: through whole turns (a good one and one the provider rejects, echoing the
key), with logging captured at DEBUG, the API key shows up only in the Authorization header
the fake model received — never in a response, an event stream, a log line, the database or
a state file."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from tests.support.app import make_user
from tests.support.model_server import FakeModelServer

from chatmem.settings import Settings
from chatmem.web.app import create_app

KEY = "sk-leakcheck-9d8c7b6a5f4e3d2c1b0a"
pytestmark = pytest.mark.parametrize("backend", ["sqlite"])  # file-backed state is scanned


@pytest.fixture
def api(settings: Settings) -> Iterator[TestClient]:
    app = create_app(settings.model_copy(update={"allow_private_endpoints": True}))
    with TestClient(app) as client:
        yield client


def _wait(api: TestClient, run_id: str, headers: dict[str, str]) -> dict[str, Any]:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        run = api.get(f"/api/v1/runs/{run_id}", headers=headers).json()
        if run["status"] != "running":
            return dict(run)
        time.sleep(0.02)
    raise AssertionError("turn did not finish")


def test_api_key_never_leaks_through_whole_turns(
    api: TestClient,
    model_server: FakeModelServer,
    caplog: pytest.LogCaptureFixture,
    settings: Settings,
) -> None:
    caplog.set_level(logging.DEBUG)
    user = make_user(api, "alice")
    seen: list[str] = []

    profile = api.post(
        "/api/v1/profiles",
        json={
            "name": "m",
            "base_url": model_server.base_url,
            "model": "fake-model",
            "api_key": KEY,
        },
        headers=user.headers,
    )
    assert profile.status_code == 201, profile.text
    conversation = api.post(
        "/api/v1/conversations",
        json={"title": "t", "profile_id": profile.json()["id"]},
        headers=user.headers,
    )
    assert conversation.status_code == 201, conversation.text
    cid = conversation.json()["id"]
    seen += [profile.text, conversation.text]

    model_server.reply("All good.")
    # The provider rejects the key and echoes it back (some do): it must be scrubbed.
    model_server.error(401, {"error": {"message": f"Incorrect API key provided: {KEY}"}})
    statuses = []
    for content in ("first question", "second question"):
        started = api.post(
            f"/api/v1/conversations/{cid}/turns", json={"content": content}, headers=user.headers
        )
        assert started.status_code == 202, started.text
        run_id = started.json()["run_id"]
        run = _wait(api, run_id, user.headers)
        statuses.append(run["status"])
        events = api.get(f"/api/v1/runs/{run_id}/events", headers=user.headers)
        seen += [started.text, str(run), events.text]
    assert statuses == ["completed", "failed"]
    for path in (
        f"/api/v1/conversations/{cid}",
        f"/api/v1/conversations/{cid}/messages",
        f"/api/v1/conversations/{cid}/context",
        "/api/v1/profiles",
    ):
        seen.append(api.get(path, headers=user.headers).text)

    assert all(KEY not in text for text in seen)
    assert KEY not in caplog.text
    assert all(KEY not in record.getMessage() for record in caplog.records)
    for path in settings.state_dir.rglob("*"):
        if path.is_file():
            assert KEY.encode() not in path.read_bytes(), path
    chats = model_server.chat_requests
    assert len(chats) == 2
    assert all(r.headers["authorization"] == f"Bearer {KEY}" for r in chats)
    assert all(KEY not in str(r.body) for r in chats)  # never sent to the model as text
