"""``GET …/context?draft=`` — the plan, served from caches, equal to a fresh plan (CTX-17)."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient
from tests.support.model_server import FakeModelServer
from tests.turns.conftest import Chat, make_chat, seed_pairs

from chatmem import context as engine
from chatmem.context.recall import recall_enabled, with_recall
from chatmem.store.engine import load_engine_conversation


def _fresh_plan(chat: Chat, draft: str, mode: str) -> dict[str, object]:
    from chatmem.turns.inputs import calibrated_tokenizer, resolve_target

    with chat.client.app.state.db.session() as session:  # type: ignore[attr-defined]
        target = resolve_target(session, chat.user.id, chat.profile_id)
        # Issue 17: the recall tool's schema is offered (and counted) where it is on.
        recall = recall_enabled(mode, None, target.recall)  # type: ignore[arg-type]
        conversation = load_engine_conversation(
            session,
            chat.conversation_id,
            tokenizer=target.engine_profile.tokenizer,
            tools=[dict(t) for t in with_recall((), recall)],
        )
        plan = engine.plan(
            conversation,
            target.engine_profile,
            mode=mode,  # type: ignore[arg-type]
            draft=draft or None,
            tokenizer=calibrated_tokenizer(session, target, None),
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


# ---------- GET /api/v1/profiles/{id}/context: the plan of a chat not created yet ----------


@pytest.mark.parametrize("mode", ["full", "economy", "window", "off"])
def test_a_new_chat_plans_like_an_empty_conversation_with_that_profile_CTX_17(
    turn_client: TestClient, model_server: FakeModelServer, mode: str
) -> None:
    """Before the first message is sent there is no conversation: the counter asks the
    profile's plan, which is exactly the plan of an empty conversation with that profile."""
    chat = make_chat(
        turn_client,
        model_server,
        mode=mode,
        profile={"context_window": 8192, "answer_reserve": 1024},
    )
    for draft in ("", "H", "Hello, how does memory work?", "word " * 1_000):
        served = turn_client.get(
            f"/api/v1/profiles/{chat.profile_id}/context",
            params={"draft": draft, "mode": mode},
            headers=chat.headers,
        )
        assert served.status_code == 200, served.text
        empty_conversation = turn_client.get(
            f"/api/v1/conversations/{chat.conversation_id}/context",
            params={"draft": draft},
            headers=chat.headers,
        )
        assert served.json() == empty_conversation.json(), draft
        assert served.json() == _fresh_plan(chat, draft, mode)
    plan = served.json()
    assert plan["mode"] == mode
    assert plan["status"] == {}
    assert plan["tokens"]["window"] == 8192
    assert plan["tokens"]["used"] > 1_000  # the draft counts
    assert plan["messages"][-1] == {"role": "user", "content": "word " * 1_000}


def test_a_new_chat_plan_defaults_to_full_and_follows_the_draft(chat: Chat) -> None:
    url = f"/api/v1/profiles/{chat.profile_id}/context"
    empty = chat.client.get(url, headers=chat.headers)
    typed = chat.client.get(url, params={"draft": "word " * 500}, headers=chat.headers)
    assert empty.status_code == typed.status_code == 200
    assert empty.json()["mode"] == "full"
    assert typed.json()["tokens"]["used"] > empty.json()["tokens"]["used"]
    assert typed.json()["price"]["next_request"] > empty.json()["price"]["next_request"]
    assert typed.json()["price"]["free"] is False


def test_a_stateless_profile_plans_without_memory_whatever_the_mode_CTX_7(
    turn_client: TestClient, model_server: FakeModelServer
) -> None:
    chat = make_chat(turn_client, model_server, profile={"stateless": True})
    plan = turn_client.get(
        f"/api/v1/profiles/{chat.profile_id}/context",
        params={"draft": "hi", "mode": "full"},
        headers=chat.headers,
    )
    assert plan.status_code == 200, plan.text
    assert plan.json()["mode"] == "off"


def test_a_free_profile_plan_says_free(
    turn_client: TestClient, model_server: FakeModelServer
) -> None:
    chat = make_chat(turn_client, model_server, profile={"free": True})
    plan = turn_client.get(
        f"/api/v1/profiles/{chat.profile_id}/context",
        params={"draft": "hi"},
        headers=chat.headers,
    ).json()
    assert plan["price"]["free"] is True


def test_another_users_or_a_missing_profile_is_not_found_STORE_1(
    turn_client: TestClient, model_server: FakeModelServer
) -> None:
    alice = make_chat(turn_client, model_server)
    bob = make_chat(turn_client, model_server, name="bob")
    foreign = turn_client.get(
        f"/api/v1/profiles/{alice.profile_id}/context", params={"draft": "hi"}, headers=bob.headers
    )
    missing = turn_client.get(
        "/api/v1/profiles/does-not-exist/context", params={"draft": "hi"}, headers=bob.headers
    )
    assert foreign.status_code == missing.status_code == 404
    assert foreign.json()["error"]["code"] == "not_found"
    assert foreign.json() == missing.json()  # a foreign profile looks exactly like a missing one
    anonymous = turn_client.get(f"/api/v1/profiles/{alice.profile_id}/context")
    assert anonymous.status_code == 401


def test_a_shared_profile_plans_for_every_user(
    turn_client: TestClient, model_server: FakeModelServer
) -> None:
    admin = make_chat(turn_client, model_server, name="root", admin=True)
    shared = turn_client.patch(
        f"/api/v1/profiles/{admin.profile_id}", json={"shared": True}, headers=admin.headers
    )
    assert shared.status_code == 200, shared.text
    bob = make_chat(turn_client, model_server, name="bob")
    plan = turn_client.get(
        f"/api/v1/profiles/{admin.profile_id}/context",
        params={"draft": "hi", "mode": "economy"},
        headers=bob.headers,
    )
    assert plan.status_code == 200, plan.text
    assert plan.json()["mode"] == "economy"


def test_an_unknown_mode_is_invalid_input(chat: Chat) -> None:
    response = chat.client.get(
        f"/api/v1/profiles/{chat.profile_id}/context",
        params={"mode": "everything"},
        headers=chat.headers,
    )
    assert response.status_code == 422
    assert response.json()["error"]["code"] == "invalid_input"


def test_a_draft_too_long_for_a_url_is_planned_exactly_from_a_body(
    turn_client: TestClient, model_server: FakeModelServer
) -> None:
    """A pasted document does not fit in ``?draft=`` (uvicorn refuses a request line over
    about 64 KB): ``POST`` with ``{"draft": …}`` answers the same plan, counted exactly (the
    page used to scale a prefix's count)."""
    chat = make_chat(turn_client, model_server, profile={"context_window": 200_000})
    seed_pairs(chat, 3)
    short = "How does memory work?"
    long = "def f(x):\n    return x * 2  # 42\n" * 3_000 + "Dies ist ein längerer Text. " * 2_000
    assert len(long) > 100_000
    conversation_url = f"/api/v1/conversations/{chat.conversation_id}/context"
    profile_url = f"/api/v1/profiles/{chat.profile_id}/context"
    get = turn_client.get(conversation_url, params={"draft": short}, headers=chat.headers)
    post = turn_client.post(conversation_url, json={"draft": short}, headers=chat.headers)
    assert post.status_code == 200, post.text
    assert post.json() == get.json()
    served = turn_client.post(conversation_url, json={"draft": long}, headers=chat.headers)
    assert served.status_code == 200, served.text
    assert served.json() == _fresh_plan(chat, long, "full")
    assert served.json()["messages"][-1] == {"role": "user", "content": long}
    new_chat = turn_client.post(
        profile_url, json={"draft": long, "mode": "economy"}, headers=chat.headers
    )
    assert new_chat.status_code == 200, new_chat.text
    assert new_chat.json()["mode"] == "economy"
    assert new_chat.json()["messages"][-1] == {"role": "user", "content": long}


def test_a_posted_draft_is_checked_like_any_body(chat: Chat) -> None:
    url = f"/api/v1/conversations/{chat.conversation_id}/context"
    for body in ({"draft": 5}, {"draft": "hi", "extra": 1}, ["hi"]):
        refused = chat.client.post(url, json=body, headers=chat.headers)
        assert refused.status_code == 422, body
        assert refused.json()["error"]["code"] == "invalid_input"
    bad_mode = chat.client.post(
        f"/api/v1/profiles/{chat.profile_id}/context",
        json={"draft": "hi", "mode": "everything"},
        headers=chat.headers,
    )
    assert bad_mode.status_code == 422
    assert chat.client.post(url, json={"draft": "hi"}).status_code == 401
    foreign = chat.client.post(
        "/api/v1/conversations/not-there/context", json={"draft": "hi"}, headers=chat.headers
    )
    assert foreign.status_code == 404
