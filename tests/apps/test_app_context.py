"""APPS-3: ``PUT/DELETE /api/v1/conversations/{id}/app-context`` — what an app sends with
``ui/update-model-context`` is stored with the conversation (replaced on each update,
bounded), sent to the model with every next request after the instructions, naming the
app's tool, and counted as the plan's "Apps" row (CTX-18)."""

from __future__ import annotations

import time
from typing import Any

from tests.apps.conftest import AppChat
from tests.support.app import make_user
from tests.turns.conftest import make_chat

from chatmem.store.app_context import MAX_APP_CONTEXT_TOKENS


def called(chat: AppChat, tool: str, arguments: dict[str, Any] | None = None) -> str:
    """Runs a turn in which the model calls ``tool``; the call's record id."""
    chat.model.tool_call(tool, arguments or {}, id=f"call_{tool}_{time.monotonic_ns()}")
    chat.model.reply("Done.")
    run_id = chat.start(f"Use {tool}")
    chat.wait(run_id)
    return next(
        e["data"]["tool_call_id"] for e in chat.events(run_id) if e["event"] == "tool_result"
    )


def put(chat: AppChat, body: dict[str, Any], *, headers: Any = None, cid: str = "") -> Any:
    return chat.client.put(
        f"/api/v1/conversations/{cid or chat.conversation_id}/app-context",
        json=body,
        headers=headers or chat.headers,
    )


def context(chat: AppChat, text: str, tool_call_id: str, **extra: Any) -> dict[str, Any]:
    return {"tool_call_id": tool_call_id, "content": [{"type": "text", "text": text}], **extra}


def plan(chat: AppChat) -> dict[str, Any]:
    response = chat.client.get(
        f"/api/v1/conversations/{chat.conversation_id}/context", headers=chat.headers
    )
    assert response.status_code == 200, response.text
    return dict(response.json())


def sent_to_model(chat: AppChat) -> list[dict[str, Any]]:
    """The messages of the model's newest request."""
    return chat.model.chat_requests[-1].messages


def test_the_app_context_is_sent_with_the_next_request_and_counted_APPS_3(
    app_chat: AppChat,
) -> None:
    tool_call_id = called(app_chat, "get_weather", {"city": "Oslo"})
    before = plan(app_chat)
    assert before["tokens"]["apps"] == 0
    body = context(app_chat, "The user picked the 3-day view.", tool_call_id)
    response = put(app_chat, {**body, "structuredContent": {"days": 3}})
    assert response.status_code == 200, response.text
    tokens = response.json()["tokens"]
    assert 0 < tokens <= MAX_APP_CONTEXT_TOKENS
    after = plan(app_chat)
    assert after["tokens"]["apps"] > 0
    assert after["tokens"]["used"] == before["tokens"]["used"] + after["tokens"]["apps"]
    assert after["price"]["next_request"] > before["price"]["next_request"]
    app_chat.turn("What view did I pick?")
    sent = [m for m in sent_to_model(app_chat) if "3-day view" in str(m["content"])]
    assert len(sent) == 1 and sent[0]["role"] == "system"
    assert "“get_weather”" in sent[0]["content"] and '{"days":3}' in sent[0]["content"]
    # every next request carries it, not only the first
    app_chat.turn("And again?")
    assert any("3-day view" in str(m["content"]) for m in sent_to_model(app_chat))


def test_an_update_replaces_the_context_and_delete_clears_it_APPS_3(app_chat: AppChat) -> None:
    tool_call_id = called(app_chat, "get_weather")
    assert put(app_chat, context(app_chat, "first state", tool_call_id)).status_code == 200
    assert put(app_chat, context(app_chat, "second state", tool_call_id)).status_code == 200
    app_chat.turn("Which state?")
    texts = " ".join(str(m["content"]) for m in sent_to_model(app_chat))
    assert "second state" in texts and "first state" not in texts
    url = f"/api/v1/conversations/{app_chat.conversation_id}/app-context"
    assert app_chat.client.delete(url, headers=app_chat.headers).status_code == 204
    assert plan(app_chat)["tokens"]["apps"] == 0
    app_chat.turn("Anything?")
    assert not any("second state" in str(m["content"]) for m in sent_to_model(app_chat))
    assert app_chat.client.delete(url, headers=app_chat.headers).status_code == 204


def test_a_context_over_the_bound_is_refused_and_nothing_changes_APPS_3(
    app_chat: AppChat,
) -> None:
    tool_call_id = called(app_chat, "get_weather")
    assert put(app_chat, context(app_chat, "kept state", tool_call_id)).status_code == 200
    kept = plan(app_chat)["tokens"]["apps"]
    huge = " ".join(f"word{i}" for i in range(6_000))
    response = put(app_chat, context(app_chat, huge, tool_call_id))
    assert response.status_code == 413
    error = response.json()["error"]
    assert error["code"] == "too_large" and "4,000" in error["message"]
    assert plan(app_chat)["tokens"]["apps"] == kept
    app_chat.turn("Still there?")
    texts = " ".join(str(m["content"]) for m in sent_to_model(app_chat))
    assert "kept state" in texts and "word5999" not in texts


def test_only_a_call_with_an_app_of_this_conversation_may_set_it_APPS_3(
    app_chat: AppChat,
) -> None:
    plain = called(app_chat, "plain_echo", {"text": "x"})
    for tool_call_id in (plain, "no-such-call"):
        response = put(app_chat, context(app_chat, "state", tool_call_id))
        assert response.status_code == 404, tool_call_id
        assert response.json()["error"]["code"] == "not_found"
    # a call with an app, but of another conversation of the same user
    other = app_chat.client.post(
        "/api/v1/conversations",
        json={"title": "other", "profile_id": app_chat.profile_id},
        headers=app_chat.headers,
    ).json()["id"]
    tool_call_id = called(app_chat, "get_weather")
    assert put(app_chat, context(app_chat, "x", tool_call_id), cid=other).status_code == 404
    assert plan(app_chat)["tokens"]["apps"] == 0


def test_other_users_conversations_are_not_found_STORE_1(app_chat: AppChat) -> None:
    tool_call_id = called(app_chat, "get_weather")
    mallory = make_user(app_chat.client, "mallory")
    response = put(app_chat, context(app_chat, "mine now", tool_call_id), headers=mallory.headers)
    assert response.status_code == 404 and response.json()["error"]["code"] == "not_found"
    url = f"/api/v1/conversations/{app_chat.conversation_id}/app-context"
    assert app_chat.client.delete(url, headers=mallory.headers).status_code == 404
    assert put(app_chat, context(app_chat, "x", tool_call_id), cid="nope").status_code == 404


def test_a_malformed_update_is_invalid_input(app_chat: AppChat) -> None:
    tool_call_id = called(app_chat, "get_weather")
    for body in (
        {"tool_call_id": tool_call_id},
        {"tool_call_id": tool_call_id, "content": "text"},
        {"tool_call_id": tool_call_id, "content": [], "extra": 1},
    ):
        response = put(app_chat, body)
        assert response.status_code == 422, body
        assert response.json()["error"]["code"] == "invalid_input"


def test_a_conversation_without_app_context_plans_as_before(app_chat: AppChat) -> None:
    chat = make_chat(app_chat.client, app_chat.model, name="bob")
    result = chat.client.get(
        f"/api/v1/conversations/{chat.conversation_id}/context", headers=chat.headers
    ).json()
    assert result["tokens"]["apps"] == 0
