"""CTX-24: ``GET/POST …/facts``, ``PATCH/DELETE …/facts/{fid}`` — the facts the user pins to a
conversation ("Remember always") are kept with it, bounded, private to its owner, sent to
the model in every request right after the summary, and counted as the plan's "facts" row."""

from __future__ import annotations

from typing import Any

from tests.support.app import make_user
from tests.turns.conftest import Chat, seed_pairs

from chatmem.context.pinned_facts import HEADER
from chatmem.store.pinned_facts import MAX_FACT_CHARS, MAX_FACTS, MAX_FACTS_TOKENS


def url(chat: Chat, fid: str = "", *, cid: str = "") -> str:
    base = f"/api/v1/conversations/{cid or chat.conversation_id}/facts"
    return f"{base}/{fid}" if fid else base


def pin(chat: Chat, text: str, **extra: Any) -> dict[str, Any]:
    response = chat.client.post(url(chat), json={"text": text, **extra}, headers=chat.headers)
    assert response.status_code == 201, response.text
    return dict(response.json())


def listed(chat: Chat) -> list[str]:
    response = chat.client.get(url(chat), headers=chat.headers)
    assert response.status_code == 200, response.text
    return [f["text"] for f in response.json()["items"]]


def plan(chat: Chat) -> dict[str, Any]:
    response = chat.client.get(
        f"/api/v1/conversations/{chat.conversation_id}/context", headers=chat.headers
    )
    assert response.status_code == 200, response.text
    return dict(response.json())


def facts_sent(chat: Chat) -> list[dict[str, Any]]:
    """The facts' message(s) in the model's newest request."""
    return [m for m in chat.model.chat_requests[-1].messages if HEADER in str(m["content"])]


def test_ctx24_pin_list_edit_delete(chat: Chat) -> None:
    chat.model.reply("Noted.")
    chat.turn("The order number is ORD-58213.")
    message_id = chat.messages()[0]["id"]
    first = pin(chat, "  Order ORD-58213  ", message_id=message_id)
    assert first["text"] == "Order ORD-58213"  # trimmed: what is sent is what is shown
    assert first["message_id"] == message_id and first["created_at"].endswith("Z")
    second = pin(chat, "Budget: 4,200 EUR")
    assert second["message_id"] is None
    assert listed(chat) == ["Order ORD-58213", "Budget: 4,200 EUR"]  # oldest first
    edited = chat.client.patch(
        url(chat, second["id"]), json={"text": "Budget: 5,000 EUR"}, headers=chat.headers
    )
    assert edited.status_code == 200, edited.text
    assert edited.json()["text"] == "Budget: 5,000 EUR" and edited.json()["id"] == second["id"]
    assert listed(chat) == ["Order ORD-58213", "Budget: 5,000 EUR"]  # its place stays
    gone = chat.client.delete(url(chat, first["id"]), headers=chat.headers)
    assert gone.status_code == 204
    assert listed(chat) == ["Budget: 5,000 EUR"]
    assert chat.client.delete(url(chat, first["id"]), headers=chat.headers).status_code == 404


def test_ctx24_pinned_facts_are_in_every_request_and_counted(chat: Chat) -> None:
    before = plan(chat)
    assert before["tokens"]["facts"] == 0
    pin(chat, "The customer is Ms. Ilse Brandt.")
    pin(chat, "Ship to /srv/orders/ORD-58213.")
    after = plan(chat)
    assert after["tokens"]["facts"] > 0
    assert after["tokens"]["used"] == before["tokens"]["used"] + after["tokens"]["facts"]
    assert after["price"]["next_request"] > before["price"]["next_request"]
    for question in ("Who is the customer?", "Where does it ship?", "Thanks"):
        chat.model.reply("OK.")
        chat.turn(question)
        sent = facts_sent(chat)
        assert len(sent) == 1 and sent[0]["role"] == "system"
        assert (
            "- The customer is Ms. Ilse Brandt.\n- Ship to /srv/orders/ORD-58213."
            in (sent[0]["content"])
        )
    # unpinned: the next request goes without it
    fid = chat.client.get(url(chat), headers=chat.headers).json()["items"][0]["id"]
    chat.client.delete(url(chat, fid), headers=chat.headers)
    chat.model.reply("OK.")
    chat.turn("Again?")
    assert "Ilse Brandt" not in facts_sent(chat)[0]["content"]


def test_ctx24_facts_go_right_after_the_summary(chat: Chat) -> None:
    seed_pairs(chat, 4)
    chat.model.reply("Goal: squares. Key facts: 1, 4, 9, 16.")
    response = chat.client.post(
        f"/api/v1/conversations/{chat.conversation_id}/compact", json={}, headers=chat.headers
    )
    assert response.status_code in (200, 202), response.text
    pin(chat, "Use metric units.")
    messages = plan(chat)["messages"]
    at = next(k for k, m in enumerate(messages) if m["content"].startswith("Summary of"))
    assert HEADER in messages[at + 1]["content"]


def test_ctx24_bounds_are_clear_errors_and_store_nothing(chat: Chat) -> None:
    for body in ({"text": ""}, {"text": "   \n "}, {"text": "x" * (MAX_FACT_CHARS + 1)}):
        response = chat.client.post(url(chat), json=body, headers=chat.headers)
        assert response.status_code == 422, body
        assert response.json()["error"]["code"] == "invalid_input"
    assert "at most 1,000 characters" in response.json()["error"]["message"]
    for body in ({}, {"text": 5}, {"text": "x", "extra": 1}):
        response = chat.client.post(url(chat), json=body, headers=chat.headers)
        assert response.status_code == 422, body
    response = chat.client.post(
        url(chat), json={"text": "x", "message_id": "nope"}, headers=chat.headers
    )
    assert response.status_code == 404
    assert listed(chat) == []
    # together they may take at most MAX_FACTS_TOKENS of every request
    long = "word " * (MAX_FACT_CHARS // 5 - 1)
    while True:
        response = chat.client.post(url(chat), json={"text": long}, headers=chat.headers)
        if response.status_code != 201:
            break
    assert response.status_code == 413 and response.json()["error"]["code"] == "too_large"
    assert f"{MAX_FACTS_TOKENS:,}" in response.json()["error"]["message"]
    kept = listed(chat)
    assert plan(chat)["tokens"]["facts"] <= MAX_FACTS_TOKENS
    fid = chat.client.get(url(chat), headers=chat.headers).json()["items"][0]["id"]
    too_long = chat.client.patch(url(chat, fid), json={"text": long * 3}, headers=chat.headers)
    assert too_long.status_code == 422
    assert listed(chat) == kept


def test_ctx24_at_most_max_facts_per_conversation(chat: Chat) -> None:
    for k in range(MAX_FACTS):
        pin(chat, f"fact {k}")
    response = chat.client.post(url(chat), json={"text": "one more"}, headers=chat.headers)
    assert response.status_code == 422
    assert f"at most {MAX_FACTS} pinned facts" in response.json()["error"]["message"]
    assert len(listed(chat)) == MAX_FACTS


def test_ctx24_other_users_never_see_or_change_them_STORE_1(chat: Chat) -> None:
    fact = pin(chat, "secret: 1234-5678")
    mallory = make_user(chat.client, "mallory")
    h = mallory.headers
    for response in (
        chat.client.get(url(chat), headers=h),
        chat.client.post(url(chat), json={"text": "mine"}, headers=h),
        chat.client.patch(url(chat, fact["id"]), json={"text": "mine"}, headers=h),
        chat.client.delete(url(chat, fact["id"]), headers=h),
        chat.client.get(url(chat, cid="nope"), headers=chat.headers),
    ):
        assert response.status_code == 404 and response.json()["error"]["code"] == "not_found"
    # a fact id of another conversation is not found in this one
    other = chat.client.post(
        "/api/v1/conversations", json={"title": "other"}, headers=chat.headers
    ).json()["id"]
    response = chat.client.delete(url(chat, fact["id"], cid=other), headers=chat.headers)
    assert response.status_code == 404
    assert listed(chat) == ["secret: 1234-5678"]


def test_ctx24_facts_are_deleted_with_the_conversation(chat: Chat) -> None:
    pin(chat, "gone with it")
    response = chat.client.delete(
        f"/api/v1/conversations/{chat.conversation_id}", headers=chat.headers
    )
    assert response.status_code in (200, 204)
    from sqlalchemy import func, select

    from chatmem.store.tables.pinned_facts import PinnedFactBlockRow, PinnedFactRow

    with chat.client.app.state.db.session() as session:  # type: ignore[attr-defined]
        for table in (PinnedFactRow, PinnedFactBlockRow):
            assert session.scalar(select(func.count()).select_from(table)) == 0
    assert chat.client.get(url(chat), headers=chat.headers).status_code == 404
