"""``GET …/context?draft=`` — the plan, served from caches, equal to a fresh plan (CTX-17)."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient
from tests.support.model_server import FakeModelServer
from tests.turns.conftest import Chat, make_chat, seed_pairs

from chatmem import context as engine
from chatmem.store.engine import load_engine_conversation


def _fresh_plan(chat: Chat, draft: str, mode: str) -> dict[str, object]:
    from chatmem.turns.inputs import calibrated_tokenizer, resolve_target

    with chat.client.app.state.db.session() as session:  # type: ignore[attr-defined]
        target = resolve_target(session, chat.user.id, chat.profile_id)
        conversation = load_engine_conversation(
            session, chat.conversation_id, tokenizer=target.engine_profile.tokenizer
        )
        plan = engine.plan(
            conversation,
            target.engine_profile,
            mode=mode,  # type: ignore[arg-type]
            draft=draft or None,
            tokenizer=calibrated_tokenizer(session, target),
        )
        return plan.to_dict()  # type: ignore[no-any-return]


@pytest.mark.parametrize("mode", ["full", "economy", "window", "off"])
def test_every_keystroke_gets_exactly_the_fresh_plan_CTX_17(
    turn_client: TestClient, model_server: FakeModelServer, mode: str
) -> None:
    chat = make_chat(turn_client, model_server, mode=mode, profile={"context_window": 8192})
    seed_pairs(chat, 40)
    sentence = "How does memory work when a conversation grows long?"
    for end in range(0, len(sentence) + 1, 3):
        draft = sentence[:end]
        served = turn_client.get(
            f"/api/v1/conversations/{chat.conversation_id}/context",
            params={"draft": draft},
            headers=chat.headers,
        )
        assert served.status_code == 200
        assert served.json() == _fresh_plan(chat, draft, mode), draft


def test_the_plan_follows_new_messages_and_exclusions(chat: Chat) -> None:
    seed_pairs(chat, 3)
    url = f"/api/v1/conversations/{chat.conversation_id}/context"
    first = chat.client.get(url, headers=chat.headers).json()
    assert len(first["status"]) == 6
    seed_pairs(chat, 1, start=4)
    second = chat.client.get(url, headers=chat.headers).json()
    assert len(second["status"]) == 8
    target = chat.messages()[0]["id"]
    excluded = chat.client.put(
        f"/api/v1/conversations/{chat.conversation_id}/messages/{target}/exclusion",
        headers=chat.headers,
    )
    assert excluded.status_code in (200, 204), excluded.text
    third = chat.client.get(url, headers=chat.headers).json()
    assert third["status"][target] == "excluded"
    assert third == _fresh_plan(chat, "", "full")


def test_the_plan_follows_a_change_of_the_summarisers_prices_CTX_9(
    turn_client: TestClient, model_server: FakeModelServer
) -> None:
    """The summariser is another profile: a change to it invalidates the cached plan (its
    prices are the compaction's), for this conversation and no other."""
    chat = make_chat(
        turn_client,
        model_server,
        profile={
            "context_window": 8192,
            "input_price_per_mtok": 3.0,
            "output_price_per_mtok": 15.0,
        },
    )
    other = make_chat(turn_client, model_server, name="bob")  # another user's conversation
    seed_pairs(chat, 400)  # past the compaction threshold
    seed_pairs(other, 2)
    cheap = turn_client.post(
        "/api/v1/profiles",
        json={
            "name": "cheap summariser",
            "base_url": model_server.base_url,
            "model": "fake-small",
            "input_price_per_mtok": 0.1,
            "output_price_per_mtok": 0.4,
        },
        headers=chat.headers,
    ).json()["id"]
    patched = turn_client.patch(
        f"/api/v1/profiles/{chat.profile_id}",
        json={"summarizer_profile_id": cheap},
        headers=chat.headers,
    )
    assert patched.status_code == 200, patched.text
    url = f"/api/v1/conversations/{chat.conversation_id}/context"
    before = turn_client.get(url, headers=chat.headers).json()
    assert before == _fresh_plan(chat, "", "full")
    assert (
        turn_client.get(
            f"/api/v1/conversations/{other.conversation_id}/context", headers=other.headers
        ).status_code
        == 200
    )
    repriced = turn_client.patch(
        f"/api/v1/profiles/{cheap}",
        json={"input_price_per_mtok": 1.0, "output_price_per_mtok": 5.0},
        headers=chat.headers,
    )
    assert repriced.status_code == 200, repriced.text
    after = turn_client.get(url, headers=chat.headers).json()
    assert after == _fresh_plan(chat, "", "full")
    assert after != before
