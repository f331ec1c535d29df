"""Model locks enforced by the server, "Auto", and extensions that lift a lock (USE-3 …
USE-5).  Every test runs on SQLite and PostgreSQL (the ``turn_client`` fixture)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from fastapi.testclient import TestClient
from tests.support.app import ApiUser, make_user
from tests.support.model_server import FakeModelServer
from tests.turns.conftest import Chat, make_chat

from chatmem.store.tables.runs import UsageRow
from chatmem.turns import answerer, usage
from chatmem.web.views.usage import usage_public


def _shared_profile(
    client: TestClient, admin: ApiUser, model: FakeModelServer, name: str, **fields: Any
) -> str:
    body = {"name": name, "base_url": model.base_url, "model": f"{name}-model", "shared": True}
    response = client.post("/api/v1/profiles", json={**body, **fields}, headers=admin.headers)
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


def _rank(client: TestClient, admin: ApiUser, profile_id: str, rank: int | None) -> None:
    response = client.patch(
        f"/api/v1/admin/profiles/{profile_id}", json={"auto_rank": rank}, headers=admin.headers
    )
    assert response.status_code == 200, response.text


def _last_answer(chat: Chat) -> dict[str, Any]:
    items = chat.client.get(
        f"/api/v1/conversations/{chat.conversation_id}/messages", headers=chat.headers
    ).json()["items"]
    return [m for m in items if m["role"] == "assistant"][-1]


def _exhaust(chat: Chat, model: FakeModelServer) -> None:
    """A paid answer that uses up a tiny session limit."""
    settings = chat.client.app.state.settings  # type: ignore[attr-defined]
    settings.usage_session_limit = 0.0001
    model.reply("Paid answer.", usage=(1000, 100))
    assert chat.turn("Spend")["status"] == "completed"
    usage_now = chat.client.get("/api/v1/usage", headers=chat.headers).json()
    assert usage_now["exhausted_by"] == "session"


def test_a_locked_model_is_answered_by_the_fallback_with_a_note_USE_4(
    turn_client: TestClient, model_server: FakeModelServer
) -> None:
    chat = make_chat(turn_client, model_server)
    admin = make_user(turn_client, "root", admin=True)
    basic = _shared_profile(turn_client, admin, model_server, "basic", free=True)
    turn_client.app.state.settings.usage_fallback_profile_id = basic  # type: ignore[attr-defined]
    first = chat.turn("First")
    assert first["answered_by"] == chat.profile_id and first["answered_reason"] is None
    assert _last_answer(chat)["answered_by"]["note"] is None
    _exhaust(chat, model_server)

    model_server.reply("Fallback answer.")
    run_id = chat.start("Second")  # the conversation still names the paid model
    run = chat.wait(run_id)
    assert model_server.chat_requests[-1].body["model"] == "basic-model"
    assert run["answered_by"] == basic and run["answered_reason"] == "credits_exhausted"
    answer = _last_answer(chat)
    assert answer["content"] == "Fallback answer."
    assert answer["answered_by"] == {
        "profile_id": basic,
        "name": "basic",
        "reason": "credits_exhausted",
        "note": "Answered by basic: credits exhausted",
    }
    done = next(e for e in chat.events(run_id) if e["event"] == "done")
    assert done["data"]["answered_by"]["note"] == "Answered by basic: credits exhausted"
    conversation = turn_client.get(
        f"/api/v1/conversations/{chat.conversation_id}", headers=chat.headers
    ).json()
    assert conversation["profile_id"] == chat.profile_id  # the user's choice is kept
    shown = turn_client.get("/api/v1/usage", headers=chat.headers).json()["fallback"]
    assert shown == {"profile_id": basic, "name": "basic", "reason": "session"}


def test_without_a_fallback_a_locked_paid_model_is_refused_USE_4(
    turn_client: TestClient, model_server: FakeModelServer
) -> None:
    chat = make_chat(turn_client, model_server)
    _exhaust(chat, model_server)
    before = len(model_server.chat_requests)
    response = chat.submit("Anything")
    assert response.status_code == 402
    assert response.json()["error"]["code"] == "insufficient_credits"
    assert len(model_server.chat_requests) == before
    assert [m["content"] for m in chat.messages() if m["role"] == "user"] == ["Spend"]


def test_auto_picks_the_best_ranked_model_the_user_may_use_now_USE_4(
    turn_client: TestClient, model_server: FakeModelServer
) -> None:
    chat = make_chat(turn_client, model_server)
    admin = make_user(turn_client, "root", admin=True)
    premium = _shared_profile(
        turn_client,
        admin,
        model_server,
        "premium",
        input_price_per_mtok=30.0,
        output_price_per_mtok=60.0,
    )
    basic = _shared_profile(turn_client, admin, model_server, "basic", free=True)
    _shared_profile(turn_client, admin, model_server, "unranked")
    chat.set(profile_id="auto")
    # No ranks yet: Auto picks among the user's own profiles.
    model_server.reply("From the user's own.", usage=(10, 10))
    own = chat.turn("No ranks yet")
    assert own["answered_by"] == chat.profile_id and own["answered_reason"] == "auto"
    _rank(turn_client, admin, basic, 2)
    _rank(turn_client, admin, premium, 1)
    plan = turn_client.get(
        f"/api/v1/conversations/{chat.conversation_id}/context",
        params={"draft": "Hello"},
        headers=chat.headers,
    )
    assert plan.status_code == 200 and plan.json()["price"]["free"] is False  # premium's

    model_server.reply("From premium.", usage=(1000, 100))
    run = chat.turn("Hello")
    assert model_server.chat_requests[-1].body["model"] == "premium-model"
    assert run["answered_by"] == premium and run["answered_reason"] == "auto"
    assert _last_answer(chat)["answered_by"]["note"] == "Answered by premium (Auto)"

    # Used up (0.036 USD spent): Auto moves to the free model, and says why.
    turn_client.app.state.settings.usage_session_limit = 0.01  # type: ignore[attr-defined]
    model_server.reply("From basic.")
    run = chat.turn("Again")
    assert model_server.chat_requests[-1].body["model"] == "basic-model"
    assert run["answered_by"] == basic and run["answered_reason"] == "credits_exhausted"
    actions = turn_client.get("/api/v1/admin/actions", headers=admin.headers).json()["items"]
    assert [a["action"] for a in reversed(actions)] == [
        *["add_shared_profile"] * 3,
        *["rank_profile"] * 2,
    ]
    assert actions[-1]["details"]["name"] == "premium" and actions[-1]["admin_name"] == "root"
    other = make_user(turn_client, "bob")
    settings = turn_client.app.state.settings  # type: ignore[attr-defined]
    with turn_client.app.state.db.session() as session:  # type: ignore[attr-defined]
        assert answerer.resolve_auto_profile(session, chat.user.id, settings).profile_id == basic
        assert answerer.resolve_auto_profile(session, other.id, settings).profile_id == premium


def test_a_granted_extension_lifts_the_lock_and_a_decline_is_shown_USE_5(
    turn_client: TestClient, model_server: FakeModelServer
) -> None:
    chat = make_chat(turn_client, model_server)
    admin = make_user(turn_client, "root", admin=True)
    basic = _shared_profile(turn_client, admin, model_server, "basic", free=True)
    turn_client.app.state.settings.usage_fallback_profile_id = basic  # type: ignore[attr-defined]
    _exhaust(chat, model_server)
    turn_client.post("/api/v1/usage/extension-requests", headers=chat.headers)
    pending = turn_client.get("/api/v1/admin/extension-requests", headers=admin.headers).json()[
        "items"
    ]
    assert [(r["user_name"], r["status"], r["reason"]) for r in pending] == [
        ("alice", "pending", "session")
    ]
    granted = turn_client.post(
        f"/api/v1/admin/extension-requests/{pending[0]['id']}/grant",
        json={"amount_usd": 1.0, "scope": "period"},
        headers=admin.headers,
    )
    assert granted.status_code == 200, granted.text
    now = turn_client.get("/api/v1/usage", headers=chat.headers).json()
    assert now["exhausted"] is False and now["ring"] < 1
    assert now["session"]["included"] == 1.0001
    assert now["requests"][0]["status"] == "granted" and now["requests"][0]["amount_usd"] == 1.0

    model_server.reply("Paid again.", usage=(10, 10))
    run = chat.turn("Unlocked?")
    assert model_server.chat_requests[-1].body["model"] == "fake-model"
    assert run["answered_by"] == chat.profile_id and run["answered_reason"] is None

    # A second request (a day later) is declined: the user sees it on the usage page.
    with turn_client.app.state.db.session() as session:  # type: ignore[attr-defined]
        from chatmem.store.tables.runs import ExtensionRequest

        session.add(ExtensionRequest(user_id=chat.user.id, reason="session"))
    second = [
        r
        for r in turn_client.get(
            "/api/v1/admin/extension-requests?status=pending", headers=admin.headers
        ).json()["items"]
    ]
    assert len(second) == 1
    turn_client.post(
        f"/api/v1/admin/extension-requests/{second[0]['id']}/decline", headers=admin.headers
    )
    statuses = [
        r["status"]
        for r in turn_client.get("/api/v1/usage", headers=chat.headers).json()["requests"]
    ]
    assert sorted(statuses) == ["declined", "granted"]


def _ledger(client: TestClient, user_id: str, rows: list[tuple[datetime, float]]) -> None:
    with client.app.state.db.session() as session:  # type: ignore[attr-defined]
        for created, cost in rows:
            session.add(
                UsageRow(
                    user_id=user_id,
                    kind="answer",
                    profile_id="p",
                    model="m",
                    cost=cost,
                    created_at=created,
                )
            )


def test_resets_at_is_when_the_bar_next_changes_USE_4(
    turn_client: TestClient, model_server: FakeModelServer
) -> None:
    chat = make_chat(turn_client, model_server)
    settings = turn_client.app.state.settings  # type: ignore[attr-defined]
    settings.usage_session_limit, settings.usage_week_limit = 1.0, 10.0
    now = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
    _ledger(
        turn_client,
        chat.user.id,
        [
            (now - timedelta(days=2), 3.0),  # in the week only
            (now - timedelta(hours=4), 0.5),
            (now - timedelta(hours=3), 0.25),
            (now - timedelta(hours=1), 0.5),
        ],
    )
    with turn_client.app.state.db.session() as session:  # type: ignore[attr-defined]
        summary = usage_public(usage.usage_summary(session, chat.user.id, settings, now=now))
    # Session: 1.25 of 1.0 spent; under the limit once the 0.5 of 4 h ago has left (5 h).
    assert summary["session"]["spent"] == 1.25 and summary["exhausted_by"] == "session"
    assert summary["session"]["resets_at"] == "2026-11-30T13:00:00Z"
    # Week: 4.25 of 10; the bar first drops when the oldest spending leaves it.
    assert summary["week"]["resets_at"] == "2026-12-05T12:00:00Z"
    assert summary["week"]["models"][0]["cost"] == 4.25
    later = now + timedelta(hours=1, minutes=1)
    with turn_client.app.state.db.session() as session:  # type: ignore[attr-defined]
        assert usage.exhausted_by(session, chat.user.id, settings, later) is None
