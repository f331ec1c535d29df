"""Usage ledger and limits (USE-1, USE-2, USE-3)."""

from __future__ import annotations

from fastapi.testclient import TestClient
from tests.support.model_server import FakeModelServer
from tests.turns.conftest import make_chat, seed_pairs


def test_usage_shows_spending_per_conversation_session_and_week_USE_1(
    turn_client: TestClient, model_server: FakeModelServer
) -> None:
    settings = turn_client.app.state.settings  # type: ignore[attr-defined]
    settings.usage_session_limit = 0.001
    settings.usage_week_limit = 0.01
    chat = make_chat(turn_client, model_server)
    model_server.reply("Answer.", usage=(1000, 100))  # 0.001 + 0.0002 = 0.0012 USD
    chat.turn("Question")
    usage = turn_client.get("/api/v1/usage", headers=chat.headers).json()
    assert usage["session"]["spent"] == usage["week"]["spent"] == usage["total"] == 0.0012
    assert usage["session"]["included"] == 0.001 and usage["week"]["included"] == 0.01
    assert usage["conversations"] == [
        {"conversation_id": chat.conversation_id, "title": "t", "cost": 0.0012}
    ]
    # USE-2: the ring fills to the higher of the two fractions; exhausted by the session limit.
    assert usage["ring"] == 1.0
    assert usage["exhausted"] is True and usage["exhausted_by"] == "session"


def test_exhausted_usage_refuses_a_paid_compaction_CTX_11(
    turn_client: TestClient, model_server: FakeModelServer
) -> None:
    turn_client.app.state.settings.usage_session_limit = 0.0001  # type: ignore[attr-defined]
    chat = make_chat(turn_client, model_server)
    model_server.reply("Answer.", usage=(1000, 100))
    chat.turn("Question")
    seed_pairs(chat, 3, start=2)
    response = turn_client.post(
        f"/api/v1/conversations/{chat.conversation_id}/compact", json={}, headers=chat.headers
    )
    assert response.status_code == 402
    assert response.json()["error"] == {
        "code": "insufficient_credits",
        "message": "Not enough credits to compress the memory",
    }


def test_a_second_extension_request_says_admins_were_notified_USE_3(
    turn_client: TestClient, model_server: FakeModelServer
) -> None:
    chat = make_chat(turn_client, model_server)
    first = turn_client.post("/api/v1/usage/extension-requests", headers=chat.headers).json()
    second = turn_client.post("/api/v1/usage/extension-requests", headers=chat.headers).json()
    assert first["notified"] is True
    assert (
        second["notified"] is False and second["message"] == "Administrators were already notified"
    )
    other = make_chat(turn_client, model_server, name="bob")
    assert turn_client.post("/api/v1/usage/extension-requests", headers=other.headers).json()[
        "notified"
    ]


def test_reported_usage_calibrates_the_estimate_upwards_CTX_2(
    turn_client: TestClient, model_server: FakeModelServer
) -> None:
    chat = make_chat(turn_client, model_server)
    draft = "An ordinary sentence about memory. " * 40

    def draft_tokens() -> int:
        plan = turn_client.get(
            f"/api/v1/conversations/{chat.conversation_id}/context",
            params={"draft": draft},
            headers=chat.headers,
        ).json()
        return int(plan["tokens"]["messages"])

    before = draft_tokens()
    model_server.reply("ok", usage=(10_000, 1))  # the provider counts far more than we did
    chat.turn("Hi")
    after = draft_tokens()
    assert after > before


def test_exhausted_usage_answers_with_the_fallback_model_USE_3(
    turn_client: TestClient, model_server: FakeModelServer
) -> None:
    chat = make_chat(turn_client, model_server)
    fallback = turn_client.post(
        "/api/v1/profiles",
        json={
            "name": "fallback",
            "base_url": model_server.base_url,
            "model": "fake-model-mini",
            "free": True,
        },
        headers=chat.headers,
    ).json()["id"]
    settings = turn_client.app.state.settings  # type: ignore[attr-defined]
    settings.usage_session_limit = 0.0001
    settings.usage_fallback_profile_id = fallback
    model_server.reply("Paid answer.", usage=(1000, 100))
    chat.turn("First")
    assert model_server.chat_requests[-1].body["model"] == "fake-model"
    model_server.reply("Fallback answer.")
    chat.turn("Second")
    assert model_server.chat_requests[-1].body["model"] == "fake-model-mini"
    assert (
        turn_client.get("/api/v1/usage", headers=chat.headers).json()["fallback_profile_id"]
        == fallback
    )
