"""The fact guard end to end (CTX-24) through a real ``chatmem serve``: a forgetful
summariser (the fake provider answers one generic sentence) folds a conversation full of
hard facts; the next request the provider receives carries every fact verbatim, in date
order, and none of the folded messages; with a small cap the summary reports what it
dropped and ``recall`` brings a dropped fact back."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from tests.support.model_server import FakeModelServer
from tests.support.runs import finished_run
from tests.support.serve import ServeProcess

from chatmem.context.recall import RECALL_TOOL
from chatmem.store.db import Database
from chatmem.store.messages import append_message
from chatmem.store.tables.conversations import Conversation

pytestmark = pytest.mark.slow

FORGETFUL = "The user and the assistant talked about a kitchen."
START = datetime(2026, 2, 2, 10, 0, tzinfo=UTC)
#: (pair, role, sentence, the fact in it) — every kind, one revised later.
PLANTED = [
    (0, "user", "The budget is 4,200 EUR.", "4,200 EUR"),
    (1, "assistant", "Your order is ORD-58213.", "ORD-58213"),
    (2, "user", "Delivery on 2026-03-14 at 14:30 please.", "2026-03-14"),
    (3, "assistant", "The plan is at /srv/kitchen/plan.pdf.", "/srv/kitchen/plan.pdf"),
    (
        4,
        "user",
        "Write to anna.k@example.org, see https://example.com/k?id=42.",
        "anna.k@example.org",
    ),
    (
        5,
        "assistant",
        "Run `make kitchen` and check “payment within 30 days of delivery”.",
        "`make kitchen`",
    ),
    (6, "user", "Update: the budget is now 5,000 EUR.", "5,000 EUR"),
    (7, "user", "Бюджет на плитку 12 500 ₽, заказ ЗАК-4471.", "ЗАК-4471"),
]


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    server = ServeProcess(tmp_path_factory.mktemp("serve-guard"))
    with FakeModelServer() as model:
        server.start()
        try:
            api = server.signed_in("guard")
            db = Database(server.database_url)
            yield {"server": server, "model": model, "api": api, "db": db}
            api.close()
            db.dispose()
        finally:
            server.stop()


def _profile(api: httpx.Client, model: FakeModelServer, window: int) -> str:
    response = api.post(
        "/api/v1/profiles",
        json={
            "name": f"fake-{window}",
            "base_url": model.base_url,
            "model": "fake-model",
            "free": True,
            "context_window": window,
        },
    )
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


def _conversation(
    world: dict[str, Any], window: int, pairs: list[tuple[str, str]]
) -> tuple[str, list[str]]:
    api = world["api"]
    profile_id = _profile(api, world["model"], window)
    created = api.post(
        "/api/v1/conversations",
        json={"title": "guard", "profile_id": profile_id, "mode": "economy"},
    )
    assert created.status_code == 201, created.text
    cid = str(created.json()["id"])
    ids: list[str] = []
    with world["db"].session() as session:
        row = session.get(Conversation, cid)
        for k, (question, answer) in enumerate(pairs):
            at = START + timedelta(days=k)
            ids.append(append_message(session, row, "user", question, created_at=at).id)
            ids.append(append_message(session, row, "assistant", answer, created_at=at).id)
    return cid, ids


def _compact(world: dict[str, Any], cid: str) -> dict[str, Any]:
    world["model"].reply(FORGETFUL)
    response = world["api"].post(f"/api/v1/conversations/{cid}/compact", json={})
    assert response.status_code == 200, response.text
    return dict(response.json())


def _turn(world: dict[str, Any], cid: str, content: str) -> dict[str, Any]:
    response = world["api"].post(f"/api/v1/conversations/{cid}/turns", json={"content": content})
    assert response.status_code == 202, response.text
    return finished_run(world["api"], response.json()["run_id"])


def test_the_next_request_carries_every_fact_in_date_order(world: dict[str, Any]) -> None:
    pairs = []
    for k in range(10):
        question, answer = f"Question {k} about cupboards.", f"Answer {k} about cupboards."
        for pair, role, sentence, _ in PLANTED:
            if pair == k:
                if role == "user":
                    question = f"{question} {sentence}"
                else:
                    answer = f"{answer} {sentence}"
        pairs.append((question, answer))
    cid, ids = _conversation(world, 32_768, pairs)
    _compact(world, cid)

    summary = world["api"].get(f"/api/v1/conversations/{cid}/summary").json()
    kept = [f["text"] for f in summary["facts_kept"]]
    for *_, fact in PLANTED:
        assert fact in kept
    assert summary["facts_dropped"] == [] and summary["facts_dropped_count"] == 0
    first = summary["facts_kept"][0]
    assert first == {
        "text": "4,200 EUR",
        "message_id": ids[0],
        "date": "2026-02-02",
        "kind": "amount",
    }

    world["model"].reply("Noted.")
    assert _turn(world, cid, "What is the budget?")["status"] == "completed"
    sent = world["model"].chat_requests[-1].messages
    memory = next(m["content"] for m in sent if "Kept verbatim" in str(m["content"]))
    positions = [memory.index(fact) for *_, fact in PLANTED]
    assert positions == sorted(positions)  # date order: the revised budget after the old one
    assert memory.index("4,200 EUR") < memory.index("5,000 EUR")
    assert FORGETFUL in memory
    text = str(sent)
    assert "Question 0 about cupboards" not in text  # the folded messages are not sent
    assert "Question 9 about cupboards" in text  # the last pair stays verbatim


def test_the_cap_reports_what_it_dropped_and_recall_finds_it(world: dict[str, Any]) -> None:
    # An 8K window: a 1,024-token summary, too small for 150 references.
    pairs = [(f"Note reference REF-{10_000 + k} for the box.", "Stored.") for k in range(150)]
    pairs.append(("Last question.", "Last answer."))
    cid, ids = _conversation(world, 8_192, pairs)
    _compact(world, cid)
    summary = world["api"].get(f"/api/v1/conversations/{cid}/summary").json()
    dropped = summary["facts_dropped"]
    assert summary["facts_dropped_count"] == len(dropped) > 0
    assert len(summary["facts_kept"]) + len(dropped) == 150
    assert f"{len(dropped)} more facts did not fit" in summary["text"]
    lost = dropped[0]
    assert lost["message_id"] in ids and lost["text"] not in summary["text"]

    world["model"].tool_call(RECALL_TOOL, {"query": lost["text"]}, id="call_recall")
    world["model"].reply("Found it.")
    assert _turn(world, cid, "Which references did not fit?")["status"] == "completed"
    tool_messages = [m for m in world["model"].chat_requests[-1].messages if m["role"] == "tool"]
    assert tool_messages and lost["text"] in tool_messages[-1]["content"]
    assert lost["message_id"] in tool_messages[-1]["content"]
