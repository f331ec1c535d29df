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
