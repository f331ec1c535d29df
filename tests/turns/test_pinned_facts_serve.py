"""CTX-24 end to end: a real ``chatmem serve`` and the fake provider on loopback.  The facts
the user pins are in every request the provider receives for the conversation — before a
compaction, in the turn that compacts, and after it — right after the summary, verbatim,
never folded into it, and counted in the plan the same before and after."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from tests.support.model_server import FakeModelServer
from tests.support.runs import finished_run
from tests.support.serve import ServeProcess

from chatmem.context.compaction import SUMMARY_HEADER, SUMMARY_INSTRUCTIONS
from chatmem.context.pinned_facts import HEADER

pytestmark = pytest.mark.slow

FACTS = ["The budget is 4,200 EUR.", "Ship order ORD-58213 to /srv/out/oslo.csv."]
BLOCK = "\n".join(f"- {f}" for f in FACTS)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[httpx.Client, Any]]:
    model = FakeModelServer().start()
    # Every answer, the summariser's too: "Summary …" (a summary keeps none of the facts).
    model.default_reply = "Summary: the user asks about lighthouses; the assistant answers."
    server = ServeProcess(tmp_path_factory.mktemp("facts-serve"))
    server.start()
    try:
        with server.signed_in("alice") as api:
            yield api, model
    finally:
        server.stop()
        model.stop()


def is_summariser(request: Any) -> bool:
    return any(SUMMARY_INSTRUCTIONS in str(m.get("content")) for m in request.messages)


def plan(api: httpx.Client, cid: str) -> dict[str, Any]:
    response = api.get(f"/api/v1/conversations/{cid}/context")
    assert response.status_code == 200, response.text
    return dict(response.json())


def test_ctx24_pinned_facts_are_in_every_request_before_and_after_a_compaction(
    world: tuple[httpx.Client, Any],
) -> None:
    api, model = world
    profile = api.post(
        "/api/v1/profiles",
        json={
            "name": "facts",
            "base_url": model.base_url,
            "model": "fake-model",
            "free": True,
            # Economy keeps the newest pair and folds one pair at a time: every turn folds.
            "economy_pairs": 1,
            "economy_batch": 1,
        },
    )
    assert profile.status_code == 201, profile.text
    created = api.post(
        "/api/v1/conversations",
        json={"title": "facts", "mode": "economy", "profile_id": profile.json()["id"]},
    )
    cid = created.json()["id"]
    for role, text in (
        ("user", "Seeded question about the Fastnet lighthouse."),
        ("assistant", "Seeded answer: it stands off Cork."),
    ):
        response = api.post(
            f"/api/v1/conversations/{cid}/messages", json={"role": role, "content": text}
        )
        assert response.status_code == 201, response.text
    for fact in FACTS:
        assert (
            api.post(f"/api/v1/conversations/{cid}/facts", json={"text": fact}).status_code == 201
        )
    before = plan(api, cid)
    facts_tokens = before["tokens"]["facts"]
    assert facts_tokens > 0
    assert sum(1 for m in before["messages"] if BLOCK in m["content"]) == 1

    start = len(model.chat_requests)
    for k in range(4):
        response = api.post(f"/api/v1/conversations/{cid}/turns", json={"content": f"Turn {k}?"})
        assert response.status_code == 202, response.text
        assert finished_run(api, response.json()["run_id"])["status"] == "completed"
    requests = model.chat_requests[start:]
    turns = [r for r in requests if not is_summariser(r)]
    folds = [r for r in requests if is_summariser(r)]
    assert len(turns) == 4
    assert folds, "no compaction happened"
    for request in turns:  # every request the model answers carries them, once, verbatim
        sent = [m for m in request.messages if HEADER in str(m["content"])]
        assert len(sent) == 1 and BLOCK in sent[0]["content"], request.messages
        assert sent[0]["role"] == "system"
    for request in folds:  # never folded: the summariser is never handed them
        assert not any(HEADER in str(m["content"]) for m in request.messages)
    last = turns[-1].messages
    assert last[0]["content"].startswith(SUMMARY_HEADER)
    assert BLOCK in last[1]["content"]  # right after the summary
    assert "Fastnet" not in str(last)  # the folded messages are not sent any more
    summary = api.get(f"/api/v1/conversations/{cid}/summary").json()
    assert "ORD-58213" not in summary["text"]  # the summary lost it; the facts did not

    after = plan(api, cid)
    assert after["tokens"]["summary"] > 0
    assert after["tokens"]["facts"] == facts_tokens  # counted the same, whatever was folded
    assert any(s == "summarized" for s in after["status"].values())

    # an edit is in the next request, a deleted fact is not
    items = api.get(f"/api/v1/conversations/{cid}/facts").json()["items"]
    api.patch(
        f"/api/v1/conversations/{cid}/facts/{items[0]['id']}", json={"text": "Budget: 5,000 EUR."}
    )
    api.delete(f"/api/v1/conversations/{cid}/facts/{items[1]['id']}")
    response = api.post(f"/api/v1/conversations/{cid}/turns", json={"content": "And now?"})
    finished_run(api, response.json()["run_id"])
    newest = [r for r in model.chat_requests if not is_summariser(r)][-1].messages
    text = "\n".join(str(m["content"]) for m in newest)
    assert "- Budget: 5,000 EUR." in text and "4,200" not in text and "ORD-58213" not in text
