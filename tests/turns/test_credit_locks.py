"""Credits exhausted (seed 004, USE-3/USE-4): Auto among the user's own profiles, extension
requests switched off, and prices under a lock.  SQLite and PostgreSQL (``turn_client``)."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient
from tests.support.app import make_user
from tests.support.model_server import FakeModelServer
from tests.turns.conftest import Chat, make_chat

from chatmem.store.tables.runs import ExtensionRequest


def _own_profile(chat: Chat, name: str, **fields: Any) -> str:
    body = {
        "name": name,
        "base_url": chat.model.base_url,
        "model": f"{name}-model",
        "input_price_per_mtok": 1.0,
        "output_price_per_mtok": 2.0,
        **fields,
    }
    response = chat.client.post("/api/v1/profiles", json=body, headers=chat.headers)
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


def _plan(chat: Chat, draft: str = "Hello") -> dict[str, Any]:
    response = chat.client.get(
        f"/api/v1/conversations/{chat.conversation_id}/context",
        params={"draft": draft},
        headers=chat.headers,
    )
    assert response.status_code == 200, response.text
    return dict(response.json())


def test_auto_picks_among_the_users_own_profiles_USE_4(
    turn_client: TestClient, model_server: FakeModelServer
) -> None:
    chat = make_chat(turn_client, model_server)  # owns "fake"; no shared profile is ranked
    second = _own_profile(chat, "second")
    chat.set(profile_id=second)
    model_server.reply("From second.", usage=(10, 10))
    assert chat.turn("Use second once")["answered_by"] == second

    # By default the one used last.
    chat.set(profile_id="auto")
    assert _plan(chat)["answered_by"]["profile_id"] == second
    model_server.reply("Auto's answer.", usage=(10, 10))
    run = chat.turn("Auto, please")
    assert model_server.chat_requests[-1].body["model"] == "second-model"
    assert run["answered_by"] == second and run["answered_reason"] == "auto"
    items = turn_client.get(
        f"/api/v1/conversations/{chat.conversation_id}/messages", headers=chat.headers
    ).json()["items"]
    assert items[-1]["answered_by"]["note"] == "Answered by second (Auto)"

    # The user's own ranking (the Models page) comes first.
    ranked = turn_client.patch(
        f"/api/v1/profiles/{chat.profile_id}", json={"auto_rank": 1}, headers=chat.headers
    )
    assert ranked.status_code == 200 and ranked.json()["auto_rank"] == 1
    model_server.reply("From fake.", usage=(10, 10))
    run = chat.turn("Again")
    assert model_server.chat_requests[-1].body["model"] == "fake-model"
    assert run["answered_by"] == chat.profile_id and run["answered_reason"] == "auto"
    bad = turn_client.patch(
        f"/api/v1/profiles/{second}", json={"auto_rank": 0}, headers=chat.headers
    )
    assert bad.status_code in (400, 422) and bad.json()["error"]["code"] == "invalid_input"

    # On /v1 too: ``model`` names the profile Auto picked.
    model_server.reply("Over /v1.", usage=(10, 10))
    answer = turn_client.post(
        "/v1/chat/completions",
        json={"model": "auto", "messages": [{"role": "user", "content": "Hi"}]},
        headers=chat.headers,
    )
    assert answer.status_code == 200, answer.text
    assert answer.json()["model"] == "fake"
    assert model_server.chat_requests[-1].body["model"] == "fake-model"


def test_auto_without_any_profile_is_refused_clearly_USE_4(turn_client: TestClient) -> None:
    user = make_user(turn_client, "nobody")
    answer = turn_client.post(
        "/v1/chat/completions",
        json={"model": "auto", "messages": [{"role": "user", "content": "Hi"}]},
        headers=user.headers,
    )
    assert answer.status_code == 400, answer.text
    assert "Models page" in answer.json()["error"]["message"]


def test_extension_requests_switched_off_are_refused_USE_3(
    turn_client: TestClient, model_server: FakeModelServer
) -> None:
    chat = make_chat(turn_client, model_server)
    admin = make_user(turn_client, "root", admin=True)
    settings = turn_client.app.state.settings  # type: ignore[attr-defined]
    settings.usage_extension_requests = False
    response = turn_client.post("/api/v1/usage/extension-requests", headers=chat.headers)
    assert response.status_code == 403, response.text
    error = response.json()["error"]
    assert error["code"] == "forbidden" and "switched off" in error["message"]
    pending = turn_client.get("/api/v1/admin/extension-requests", headers=admin.headers)
    assert pending.json()["items"] == []
    with turn_client.app.state.db.session() as session:  # type: ignore[attr-defined]
        assert session.query(ExtensionRequest).count() == 0
    assert (
        turn_client.get("/api/v1/usage", headers=chat.headers).json()["extension_requests"] is False
    )


def test_prices_under_a_lock_are_the_fallbacks_USE_3(
    turn_client: TestClient, model_server: FakeModelServer
) -> None:
    chat = make_chat(turn_client, model_server)
    admin = make_user(turn_client, "root", admin=True)
    basic = turn_client.post(
        "/api/v1/profiles",
        json={
            "name": "basic",
            "base_url": model_server.base_url,
            "model": "basic-model",
            "shared": True,
            "free": True,
            "context_window": 16384,
        },
        headers=admin.headers,
    ).json()["id"]
    settings = turn_client.app.state.settings  # type: ignore[attr-defined]
    settings.usage_fallback_profile_id = basic
    for i in range(3):
        model_server.reply(f"Answer {i}.", usage=(1000, 100))
        assert chat.turn(f"Question {i}")["status"] == "completed"
    before = _plan(chat)
    assert "answered_by" not in before and before["price"]["next_request"] > 0
    assert before["tokens"]["window"] == 32768
    paid = turn_client.get(
        f"/api/v1/conversations/{chat.conversation_id}/compact/price", headers=chat.headers
    ).json()
    assert paid["price"] > 0

    settings.usage_session_limit = 0.0001  # used up: the fallback answers
    locked = _plan(chat)
    assert locked["price"]["next_request"] == 0 and locked["price"]["free"] is True
    assert locked["price"]["compaction"] == 0
    assert locked["tokens"]["window"] == 16384  # the fallback's window
    assert locked["answered_by"] == {
        "profile_id": basic,
        "name": "basic",
        "reason": "credits_exhausted",
        "note": "Answered by basic: credits exhausted",
    }
    price = turn_client.get(
        f"/api/v1/conversations/{chat.conversation_id}/compact/price", headers=chat.headers
    ).json()
    assert price["available"] is True and price["price"] == 0
