"""A user's own API tokens: listed (never the secret), created (the secret shown once) and
revoked — over the API and from the command line.  Before, a token could only be created
(``chatmem token create``): a leaked one kept working until its user was disabled."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from fastapi.testclient import TestClient
from tests.support.app import ApiUser, make_user

from chatmem.cli import main
from chatmem.settings import Settings
from chatmem.store import accounts
from chatmem.store.db import Database
from chatmem.web.token_use import TokenUse


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def test_a_new_token_is_shown_once_works_and_is_listed_without_its_secret(
    client: TestClient, user: ApiUser
) -> None:
    created = client.post("/api/v1/tokens", json={"label": " laptop "}, headers=user.headers)
    assert created.status_code == 201, created.text
    body = created.json()
    assert body["token"].startswith("cm_") and body["label"] == "laptop"
    assert client.get("/api/v1/me", headers=bearer(body["token"])).json()["name"] == "alice"
    listed = client.get("/api/v1/tokens", headers=user.headers).json()["items"]
    assert [(t["label"], sorted(t)) for t in listed] == [
        ("test", ["created_at", "id", "label", "last_used_at"]),  # the one the fixture made
        ("laptop", ["created_at", "id", "label", "last_used_at"]),
    ]
    assert body["token"] not in str(listed)


def test_a_revoked_token_stops_at_once(client: TestClient, user: ApiUser) -> None:
    spare = client.post("/api/v1/tokens", json={"label": "ci"}, headers=user.headers).json()
    assert client.get("/api/v1/me", headers=bearer(spare["token"])).status_code == 200  # cached
    gone = client.delete(f"/api/v1/tokens/{spare['id']}", headers=user.headers)
    assert gone.status_code == 204
    refused = client.get("/api/v1/me", headers=bearer(spare["token"]))
    assert refused.status_code == 401 and refused.json()["error"]["code"] == "unauthorized"
    assert client.get("/api/v1/me", headers=user.headers).status_code == 200  # the others stay
    again = client.delete(f"/api/v1/tokens/{spare['id']}", headers=user.headers)
    assert again.status_code == 404


def test_another_users_token_is_not_found_and_keeps_working(
    client: TestClient, user: ApiUser, other_user: ApiUser
) -> None:
    (theirs,) = client.get("/api/v1/tokens", headers=other_user.headers).json()["items"]
    refused = client.delete(f"/api/v1/tokens/{theirs['id']}", headers=user.headers)
    missing = client.delete("/api/v1/tokens/not-a-token", headers=user.headers)
    assert refused.status_code == missing.status_code == 404
    assert refused.json() == missing.json()  # another user's looks exactly like none
    assert client.get("/api/v1/me", headers=other_user.headers).status_code == 200
    mine = client.get("/api/v1/tokens", headers=user.headers).json()["items"]
    assert theirs["id"] not in [t["id"] for t in mine]


def test_bad_input_and_browser_sessions_need_the_csrf_token(client: TestClient) -> None:
    make_user(client, "carol", password="s3cret!")
    login = client.post("/api/v1/auth/login", json={"name": "carol", "password": "s3cret!"})
    csrf = login.json()["csrf_token"]
    assert client.post("/api/v1/tokens", json={"label": "x"}).status_code == 403
    too_long = client.post(
        "/api/v1/tokens", json={"label": "x" * 201}, headers={"X-CSRF-Token": csrf}
    )
    assert too_long.status_code == 422 and too_long.json()["error"]["code"] == "invalid_input"
    made = client.post("/api/v1/tokens", json={}, headers={"X-CSRF-Token": csrf})
    assert made.status_code == 201 and made.json()["label"] == ""
    client.cookies.clear()
    assert client.get("/api/v1/tokens").status_code == 401


def test_the_command_line_lists_and_revokes(
    settings: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = Settings()  # as the commands read it from the environment
    settings.state_dir.mkdir(parents=True, exist_ok=True)
    db = Database.from_settings(settings)
    db.migrate()
    with db.session() as session:
        user = accounts.create_user(session, "dora")
        token = accounts.create_api_token(session, user, label="cli")
    db.dispose()

    def run(*args: str) -> tuple[int, str, str]:
        with pytest.raises(SystemExit) as ended:
            main(["token", *args])
        out, err = capsys.readouterr()
        return int(ended.value.code or 0), out, err

    code, out, _ = run("list", "dora")
    (line,) = out.splitlines()
    token_id, _created, used, label = line.split("\t")
    assert (code, used, label) == (0, "never", "cli") and token not in out
    assert run("revoke", "dora", token_id)[0] == 0
    assert run("list", "dora")[1] == ""
    code, _, err = run("revoke", "dora", token_id)
    assert code == 1 and "not found" in err
    db = Database.from_settings(settings)
    try:
        with db.session() as session:
            assert accounts.api_token_owner(session, token) is None
    finally:
        db.dispose()


def test_one_user_holds_at_most_a_hundred_tokens(client: TestClient, user: ApiUser) -> None:
    db: Database = client.app.state.db  # type: ignore[attr-defined]
    with db.session() as session:
        alice = accounts.require_user(session, "alice")
        for i in range(accounts.MAX_API_TOKENS - 1):  # the fixture made one
            accounts.create_api_token(session, alice, label=f"t{i}")
    refused = client.post("/api/v1/tokens", json={"label": "one more"}, headers=user.headers)
    assert refused.status_code == 409 and refused.json()["error"]["code"] == "quota_exceeded"
    assert "revoke one first" in refused.json()["error"]["message"]
    listed = client.get("/api/v1/tokens", headers=user.headers).json()["items"]
    spare = next(t for t in listed if t["label"] == "t0")
    assert client.delete(f"/api/v1/tokens/{spare['id']}", headers=user.headers).status_code == 204
    again = client.post("/api/v1/tokens", json={"label": "one more"}, headers=user.headers)
    assert again.status_code == 201
    bob = make_user(client, "bob")  # the bound is each user's own
    assert client.post("/api/v1/tokens", json={}, headers=bob.headers).status_code == 201


def test_when_a_token_was_last_used_is_written_a_moment_later(
    client: TestClient, user: ApiUser
) -> None:
    """A use is noted in memory (the auth path never writes) and written by the next flush:
    the server's task does it every minute; the test calls it."""
    spare = client.post("/api/v1/tokens", json={"label": "idle"}, headers=user.headers).json()
    app: Any = client.app
    before = {t["label"]: t["last_used_at"] for t in listed(client, user)}
    assert before == {"test": None, "idle": None}  # noted, not yet written
    client.portal.call(app.state.token_use.flush, app.state.db)  # type: ignore[union-attr]
    after = {t["label"]: t["last_used_at"] for t in listed(client, user)}
    assert after["test"] is not None and after["idle"] is None
    assert spare["id"] not in str(after)
    # A revoked token is no trouble to a flush.
    app.state.token_use.seen(spare["id"])
    client.delete(f"/api/v1/tokens/{spare['id']}", headers=user.headers)
    client.portal.call(app.state.token_use.flush, app.state.db)  # type: ignore[union-attr]
    assert [t["label"] for t in listed(client, user)] == ["test"]


def listed(client: TestClient, user: ApiUser) -> list[dict[str, Any]]:
    return list(client.get("/api/v1/tokens", headers=user.headers).json()["items"])


def test_two_replicas_recording_uses_never_move_a_time_back(
    client: TestClient, user: ApiUser
) -> None:
    db: Database = client.app.state.db  # type: ignore[attr-defined]
    (token,) = listed(client, user)
    later, earlier = (
        datetime(2026, 12, 1, 12, 0, tzinfo=UTC),
        datetime(2026, 12, 1, 11, 0, tzinfo=UTC),
    )
    first, second = TokenUse(clock=lambda: later), TokenUse(clock=lambda: earlier)
    first.seen(token["id"])
    second.seen(token["id"])  # another replica, which saw it an hour before, writes after
    client.portal.call(first.flush, db)  # type: ignore[union-attr]
    client.portal.call(second.flush, db)  # type: ignore[union-attr]
    (token,) = listed(client, user)
    assert token["last_used_at"].startswith("2026-12-01T12:00:00")
