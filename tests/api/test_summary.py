"""Reading and editing the summary, and "Continue in a new chat", over HTTP (CTX-23, CTX-9,
STORE-1, STORE-5, ARCH-1)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select
from tests.support.app import ApiUser, make_user

from chatmem.settings import Settings
from chatmem.store.db import Database
from chatmem.store.tables.conversations import Summary
from chatmem.store.tables.runs import Run
from chatmem.store.token_counts import counts_for_text
from chatmem.store.types import utcnow
from chatmem.turns.conversation_lock import LOCK_TTL, lock_name
from chatmem.web.app import create_app

FIRST = "Goal: Rome trip. Key facts: 3 days."
SUMMARY_KEYS = {"text", "version", "through", "message_count", "focus", "tokens", "created_at"}


@pytest.fixture
def api(settings: Settings) -> Iterator[TestClient]:
    # A loopback profile endpoint is never contacted here; allowing it keeps the test offline.
    with TestClient(create_app(settings.model_copy(update={"allow_private_endpoints": True}))) as c:
        yield c


@pytest.fixture
def alice(api: TestClient) -> ApiUser:
    return make_user(api, "alice")


@pytest.fixture
def mallory(api: TestClient) -> ApiUser:
    return make_user(api, "mallory")


def _db(api: TestClient) -> Database:
    return api.app.state.db  # type: ignore[attr-defined,no-any-return]


def _conversation(api: TestClient, who: ApiUser, **body: Any) -> dict[str, Any]:
    response = api.post("/api/v1/conversations", json=body, headers=who.headers)
    assert response.status_code == 201, response.text
    return dict(response.json())


def _say(api: TestClient, who: ApiUser, cid: str, *contents: str) -> list[str]:
    ids = []
    for index, content in enumerate(contents):
        response = api.post(
            f"/api/v1/conversations/{cid}/messages",
            json={"role": "user" if index % 2 == 0 else "assistant", "content": content},
            headers=who.headers,
        )
        assert response.status_code == 201, response.text
        ids.append(str(response.json()["id"]))
    return ids


def _summarise(
    api: TestClient, cid: str, ids: list[str], text: str, *, version: int = 1, count: int = 2
) -> None:
    """A stored summary over ``ids[:count]``, as a compaction writes it."""
    with _db(api).session(write=True) as session:
        session.add(
            Summary(
                conversation_id=cid,
                version=version,
                first_message_id=ids[0],
                through_message_id=ids[count - 1],
                message_count=count,
                text=text,
                focus="numbers",
                cost=0.002,
                model="summariser-1",
                created_at=utcnow(),
                **counts_for_text(text),
            )
        )


def _versions(api: TestClient, cid: str) -> list[tuple[Any, ...]]:
    with _db(api).session() as session:
        rows = session.execute(
            select(
                Summary.version,
                Summary.text,
                Summary.first_message_id,
                Summary.through_message_id,
                Summary.message_count,
                Summary.focus,
                Summary.cost,
                Summary.model,
            )
            .where(Summary.conversation_id == cid)
            .order_by(Summary.version)
        ).all()
        return [tuple(r) for r in rows]


def _seeded(api: TestClient, who: ApiUser, **body: Any) -> tuple[str, list[str]]:
    cid = _conversation(api, who, **body)["id"]
    ids = _say(api, who, cid, "Plan a trip to Rome", "Sure: 3 days.", "Budget?", "900 EUR.")
    _summarise(api, cid, ids, FIRST)
    return cid, ids


def _error(response: Any, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    body = response.json()["error"]
    assert body["code"] == code
    return dict(body)


# --- GET ------------------------------------------------------------------------------------


def test_ctx23_get_answers_the_newest_version(api: TestClient, alice: ApiUser) -> None:
    cid, ids = _seeded(api, alice)
    _summarise(api, cid, ids, "Goal: Rome trip. Key facts: 3 days, 900 EUR.", version=2, count=4)
    response = api.get(f"/api/v1/conversations/{cid}/summary", headers=alice.headers)
    assert response.status_code == 200, response.text
    body = response.json()
    assert SUMMARY_KEYS | {"edited"} <= set(body)
    assert body["text"] == "Goal: Rome trip. Key facts: 3 days, 900 EUR."
    assert (body["version"], body["through"], body["message_count"]) == (2, ids[3], 4)
    assert body["focus"] == "numbers"
    assert body["tokens"] == counts_for_text(body["text"])["tokens_estimate"]
    assert body["created_at"].endswith("Z")
    assert body["edited"] is False


def test_store1_summary_routes_answer_foreign_and_missing_ids_alike(
    api: TestClient, alice: ApiUser, mallory: ApiUser
) -> None:
    cid, _ = _seeded(api, alice)
    before = _versions(api, cid)
    own_conversations = api.get("/api/v1/conversations", headers=mallory.headers).json()["items"]
    for method, suffix, body in (
        ("GET", "summary", None),
        ("PUT", "summary", {"text": "pwned"}),
        ("POST", "continue", None),
    ):
        answers = [
            api.request(method, f"/api/v1/conversations/{target}/{suffix}", json=body, headers=h)
            for target, h in ((cid, mallory.headers), ("nope", mallory.headers))
        ]
        foreign, missing = (_error(r, 404, "not_found") for r in answers)
        assert foreign == missing, (method, suffix)
    assert _versions(api, cid) == before
    assert api.get("/api/v1/conversations", headers=mallory.headers).json()["items"] == (
        own_conversations
    )


def test_get_is_not_found_before_the_first_summary(api: TestClient, alice: ApiUser) -> None:
    cid = _conversation(api, alice)["id"]
    _error(api.get(f"/api/v1/conversations/{cid}/summary", headers=alice.headers), 404, "not_found")


# --- PUT ------------------------------------------------------------------------------------


def test_ctx23_an_edit_is_a_new_version_and_history_is_untouched(
    api: TestClient, alice: ApiUser
) -> None:
    cid, ids = _seeded(api, alice)
    history = api.get(f"/api/v1/conversations/{cid}/messages", headers=alice.headers).json()
    text = "Goal: Rome trip in May. Key facts: 3 days; the user is vegetarian."
    response = api.put(
        f"/api/v1/conversations/{cid}/summary", json={"text": text}, headers=alice.headers
    )
    assert response.status_code == 200, response.text
    edited = response.json()
    assert (edited["version"], edited["text"], edited["edited"]) == (2, text, True)
    assert (edited["through"], edited["message_count"], edited["focus"]) == (ids[1], 2, "numbers")
    assert edited["tokens"] == counts_for_text(text)["tokens_estimate"]
    assert api.get(f"/api/v1/conversations/{cid}/summary", headers=alice.headers).json() == edited

    first, second = _versions(api, cid)
    assert first == (1, FIRST, ids[0], ids[1], 2, "numbers", 0.002, "summariser-1")
    assert second == (2, text, ids[0], ids[1], 2, "numbers", 0.0, "edited-by-user")
    after = api.get(f"/api/v1/conversations/{cid}/messages", headers=alice.headers).json()
    assert after["items"] == history["items"]
    assert after["summary"]["version"] == 2 and after["summary"]["edited"] is True


@pytest.mark.parametrize("text", ["", "  \n\t ", "x" * 200_001])
def test_empty_or_oversized_text_is_invalid_input_and_changes_nothing(
    api: TestClient, alice: ApiUser, text: str
) -> None:
    cid, _ = _seeded(api, alice)
    before = _versions(api, cid)
    response = api.put(
        f"/api/v1/conversations/{cid}/summary", json={"text": text}, headers=alice.headers
    )
    _error(response, 422, "invalid_input")
    assert _versions(api, cid) == before


def test_the_longest_text_is_accepted(api: TestClient, alice: ApiUser) -> None:
    cid, _ = _seeded(api, alice)
    response = api.put(
        f"/api/v1/conversations/{cid}/summary", json={"text": "y" * 200_000}, headers=alice.headers
    )
    assert response.status_code == 200, response.text
    assert len(response.json()["text"]) == 200_000


def test_editing_before_the_first_summary_is_nothing_to_compress(
    api: TestClient, alice: ApiUser
) -> None:
    cid = _conversation(api, alice)["id"]
    response = api.put(
        f"/api/v1/conversations/{cid}/summary", json={"text": "mine"}, headers=alice.headers
    )
    body = _error(response, 409, "nothing_to_compress")
    assert body["message"] == "There is no summary to edit yet: compress the memory first."
    assert _versions(api, cid) == []


def test_an_edit_waits_for_a_running_compaction_or_turn(api: TestClient, alice: ApiUser) -> None:
    cid, _ = _seeded(api, alice)
    before = _versions(api, cid)
    coordinator = api.app.state.turns.coordinator  # type: ignore[attr-defined]
    portal = api.portal
    assert portal is not None
    token = portal.call(coordinator.acquire, lock_name(cid), LOCK_TTL)
    assert token is not None
    put = {"text": "edited meanwhile"}
    try:
        response = api.put(f"/api/v1/conversations/{cid}/summary", json=put, headers=alice.headers)
        _error(response, 409, "compaction_running")
        with _db(api).session(write=True) as session:
            session.add(Run(id="r1", conversation_id=cid, user_id=alice.id, status="running"))
        response = api.put(f"/api/v1/conversations/{cid}/summary", json=put, headers=alice.headers)
        _error(response, 409, "turn_running")
        assert _versions(api, cid) == before
    finally:
        portal.call(coordinator.release, lock_name(cid), token)
    with _db(api).session(write=True) as session:
        session.get_one(Run, "r1").status = "completed"
    response = api.put(f"/api/v1/conversations/{cid}/summary", json=put, headers=alice.headers)
    assert response.status_code == 200, response.text


def test_the_context_plan_follows_an_edit(api: TestClient, alice: ApiUser) -> None:
    cid, _ = _seeded(api, alice)
    path = f"/api/v1/conversations/{cid}/context"
    before = api.get(path, headers=alice.headers).json()
    assert before["tokens"]["summary"] == counts_for_text(FIRST)["tokens_estimate"]
    text = "Goal: a long Rome trip. " + "Key fact: the user likes museums. " * 40
    response = api.put(
        f"/api/v1/conversations/{cid}/summary", json={"text": text}, headers=alice.headers
    )
    assert response.status_code == 200, response.text
    after = api.get(path, headers=alice.headers).json()
    assert after["tokens"]["summary"] == counts_for_text(text)["tokens_estimate"]
    assert after["tokens"]["used"] > before["tokens"]["used"]
    assert any(text in m["content"] for m in after["messages"])


# --- POST …/continue ------------------------------------------------------------------------


def _profile(api: TestClient, who: ApiUser) -> str:
    body = {"name": "P", "base_url": "http://127.0.0.1:9/v1", "model": "m"}
    response = api.post("/api/v1/profiles", json=body, headers=who.headers)
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


def test_ctx23_continue_in_a_new_chat(api: TestClient, alice: ApiUser) -> None:
    folder = api.post("/api/v1/folders", json={"name": "Travel"}, headers=alice.headers).json()
    pid = _profile(api, alice)
    cid, _ = _seeded(
        api,
        alice,
        title="Rome",
        folder_id=folder["id"],
        mode="economy",
        profile_id=pid,
        instructions="Answer briefly.",
    )
    api.put(
        f"/api/v1/conversations/{cid}/summary",
        json={"text": "Goal: Rome. Key facts: 3 days, 900 EUR."},
        headers=alice.headers,
    )
    response = api.post(f"/api/v1/conversations/{cid}/continue", headers=alice.headers)
    assert response.status_code == 201, response.text
    new = response.json()
    assert new["id"] != cid
    assert new["title"] == "Rome (continued)"
    assert (new["folder_id"], new["mode"], new["profile_id"]) == (folder["id"], "economy", pid)
    assert new["instructions"] == "Answer briefly."
    assert (new["source_conversation_id"], new["message_count"]) == (cid, 0)
    got = api.get(f"/api/v1/conversations/{new['id']}", headers=alice.headers).json()
    assert got == {**new, "message_count": 0}
    source = api.get(f"/api/v1/conversations/{cid}", headers=alice.headers).json()
    assert source["source_conversation_id"] is None and source["message_count"] == 4

    summary = api.get(f"/api/v1/conversations/{new['id']}/summary", headers=alice.headers).json()
    assert summary["text"] == "Goal: Rome. Key facts: 3 days, 900 EUR."
    assert (summary["version"], summary["through"], summary["message_count"]) == (1, None, 0)
    assert summary["edited"] is True  # the carried text is the user's own edit
    ((version, _, first, through, count, _, cost, _),) = _versions(api, new["id"])
    assert (version, first, through, count, cost) == (1, None, None, 0, 0.0)
    assert len(_versions(api, cid)) == 2  # the source is untouched


def test_an_untitled_conversation_continues_as_continued_conversation(
    api: TestClient, alice: ApiUser
) -> None:
    cid, _ = _seeded(api, alice)
    new = api.post(f"/api/v1/conversations/{cid}/continue", headers=alice.headers).json()
    assert new["title"] == "Continued conversation"
    long = _conversation(api, alice, title="t" * 500)["id"]
    _summarise(api, long, _say(api, alice, long, "q", "a"), "S")
    new = api.post(f"/api/v1/conversations/{long}/continue", headers=alice.headers).json()
    assert len(new["title"]) <= 500 and new["title"].endswith(" (continued)")


def test_continuing_without_a_summary_is_nothing_to_compress(
    api: TestClient, alice: ApiUser
) -> None:
    cid = _conversation(api, alice, title="Fresh")["id"]
    _say(api, alice, cid, "hello", "hi")
    response = api.post(f"/api/v1/conversations/{cid}/continue", headers=alice.headers)
    body = _error(response, 409, "nothing_to_compress")
    assert body["message"] == (
        "This conversation has no summary yet: compress it first, then continue from it."
    )
    listed = api.get("/api/v1/conversations", headers=alice.headers).json()["items"]
    assert [c["id"] for c in listed] == [cid]


def test_a_continued_conversation_sends_its_summary_first(api: TestClient, alice: ApiUser) -> None:
    cid, _ = _seeded(api, alice)
    new = api.post(f"/api/v1/conversations/{cid}/continue", headers=alice.headers).json()["id"]
    history = api.get(f"/api/v1/conversations/{new}/messages", headers=alice.headers)
    assert history.status_code == 200, history.text
    assert history.json()["items"] == []
    assert history.json()["summary"]["through"] is None

    plan = api.get(f"/api/v1/conversations/{new}/context", headers=alice.headers)
    assert plan.status_code == 200, plan.text
    body = plan.json()
    assert body["tokens"]["summary"] == counts_for_text(FIRST)["tokens_estimate"]
    assert FIRST in body["messages"][0]["content"]

    asked = _say(api, alice, new, "And the hotel?")
    plan = api.get(
        f"/api/v1/conversations/{new}/context",
        params={"draft": "near Termini"},
        headers=alice.headers,
    ).json()
    assert plan["status"] == {asked[0]: "in_memory"}
    assert "Goal: Rome trip" in plan["messages"][0]["content"]
    assert plan["messages"][-1] == {"role": "user", "content": "near Termini"}
    items = api.get(f"/api/v1/conversations/{new}/messages", headers=alice.headers).json()["items"]
    assert [m["status"] for m in items] == ["in_memory"]


# --- export, import, archive ----------------------------------------------------------------


def test_store5_export_and_import_keep_a_summary_that_covers_nothing(
    api: TestClient, alice: ApiUser, mallory: ApiUser
) -> None:
    cid, _ = _seeded(api, alice)
    new = api.post(f"/api/v1/conversations/{cid}/continue", headers=alice.headers).json()["id"]
    _say(api, alice, new, "And the hotel?", "Near Termini.")
    exported = api.get("/api/v1/export", params={"conversation_id": new}, headers=alice.headers)
    assert exported.status_code == 200, exported.text
    (item,) = exported.json()["conversations"]
    assert item["summary"] == {"text": FIRST, "through": None}
    assert [s["through"] for s in item["summaries"]] == [None]

    imported = api.post("/api/v1/import", content=exported.content, headers=mallory.headers)
    assert imported.status_code == 200, imported.text
    (copy,) = api.get("/api/v1/conversations", headers=mallory.headers).json()["items"]
    summary = api.get(f"/api/v1/conversations/{copy['id']}/summary", headers=mallory.headers)
    assert summary.status_code == 200, summary.text
    assert (summary.json()["through"], summary.json()["message_count"]) == (None, 0)
    assert summary.json()["text"] == FIRST
    plan = api.get(f"/api/v1/conversations/{copy['id']}/context", headers=mallory.headers).json()
    assert "Goal: Rome trip" in plan["messages"][0]["content"]
    assert set(plan["status"].values()) == {"in_memory"}


def test_arch1_archive_round_trips_a_continued_conversation(
    api: TestClient, alice: ApiUser
) -> None:
    cid, _ = _seeded(api, alice)
    new = api.post(f"/api/v1/conversations/{cid}/continue", headers=alice.headers).json()["id"]
    _say(api, alice, new, "And the hotel?", "Near Termini.")
    api.put(
        f"/api/v1/conversations/{new}/summary",
        json={"text": "Goal: Rome. Hotel near Termini."},
        headers=alice.headers,
    )
    before = api.get(f"/api/v1/conversations/{new}/messages", headers=alice.headers).json()
    versions = _versions(api, new)

    archived = api.post(f"/api/v1/conversations/{new}/archive", headers=alice.headers)
    assert archived.status_code == 200, archived.text
    read = api.get(f"/api/v1/archive/{new}", headers=alice.headers).json()
    assert read["summary"] == {"text": "Goal: Rome. Hotel near Termini.", "through": None}
    restored = api.post(f"/api/v1/archive/{new}/restore", headers=alice.headers)
    assert restored.status_code == 200, restored.text

    after = api.get(f"/api/v1/conversations/{new}/messages", headers=alice.headers).json()
    assert after["items"] == before["items"]
    keep = ("version", "text", "through", "message_count", "focus", "tokens", "edited")
    assert {k: after["summary"][k] for k in keep} == {k: before["summary"][k] for k in keep}
    assert _versions(api, new) == versions
    got = api.get(f"/api/v1/conversations/{new}", headers=alice.headers).json()
    assert got["source_conversation_id"] == cid
