"""The fact guard's record through the summary API (CTX-24): GET answers ``facts_kept`` and
``facts_dropped`` (``{"text", "message_id"}`` and more), an edit keeps the kept facts its
text still holds and what the cap dropped."""

from __future__ import annotations

from fastapi.testclient import TestClient
from tests.api.test_summary import _conversation, _say, _summarise, alice, api  # noqa: F401
from tests.support.app import ApiUser

from chatmem.context.values import Fact
from chatmem.store.fact_records import FactRecord
from chatmem.store.tables.conversations import Summary


def _record(client: TestClient, cid: str, record: FactRecord) -> None:
    with client.app.state.db.session(write=True) as session:  # type: ignore[attr-defined]
        row = session.query(Summary).filter_by(conversation_id=cid).one()
        row.facts = record.stored()


def test_the_summary_answers_the_guards_record_and_an_edit_keeps_what_it_still_holds(
    api: TestClient,  # noqa: F811
    alice: ApiUser,  # noqa: F811
) -> None:
    cid = _conversation(api, alice, title="Kitchen")["id"]
    ids = _say(api, alice, cid, "Budget 4,200 EUR, order ORD-58213.", "Noted.", "More?", "Yes.")
    text = (
        "Goal: a kitchen.\n\n## Kept verbatim\n- 4,200 EUR\n- ORD-58213\n(1 more facts did not fit)"
    )
    _summarise(api, cid, ids, text)
    kept = (
        Fact("4,200 EUR", "amount", ids[0], "user"),
        Fact("ORD-58213", "identifier", ids[0], "user"),
    )
    dropped = (Fact("REF-10001", "identifier", ids[2], "user"),)
    _record(api, cid, FactRecord(kept, dropped, 1))

    body = api.get(f"/api/v1/conversations/{cid}/summary", headers=alice.headers).json()
    assert [(f["text"], f["message_id"]) for f in body["facts_kept"]] == [
        ("4,200 EUR", ids[0]),
        ("ORD-58213", ids[0]),
    ]
    assert body["facts_dropped"] == [
        {"text": "REF-10001", "message_id": ids[2], "date": None, "kind": "identifier"}
    ]
    assert body["facts_dropped_count"] == 1

    # The user deletes the order number from the text: it is no longer kept (their choice,
    # not the cap's); the budget stays kept (written differently); the dropped stay dropped.
    edited = api.put(
        f"/api/v1/conversations/{cid}/summary",
        json={"text": "Goal: a kitchen for 4200 eur."},
        headers=alice.headers,
    ).json()
    assert [f["text"] for f in edited["facts_kept"]] == ["4,200 EUR"]
    assert [f["text"] for f in edited["facts_dropped"]] == ["REF-10001"]
    assert edited["facts_dropped_count"] == 1


def test_a_summary_without_a_record_answers_empty_lists(
    api: TestClient,  # noqa: F811
    alice: ApiUser,  # noqa: F811
) -> None:
    cid = _conversation(api, alice, title="Old")["id"]
    ids = _say(api, alice, cid, "Hello", "Hi")
    _summarise(api, cid, ids, "Goal: greet.")
    body = api.get(f"/api/v1/conversations/{cid}/summary", headers=alice.headers).json()
    assert (body["facts_kept"], body["facts_dropped"], body["facts_dropped_count"]) == ([], [], 0)
