"""Issue 11 through a real ``chatmem serve``: a llama.cpp-like provider and a runaway answer.

chatmem runs as its own process with ``CHATMEM_MAX_ANSWER_BYTES`` set, the fake provider as
another one, scripted over HTTP to behave as llama.cpp's server does: no usage in any stream,
and a prompt beyond its 8K context answered with an empty HTTP 200 stream (the same request
without streaming gets the 400 naming the count).  The tests check what the user sees over
the API and what the ledger holds, and that the conversation goes on (PROV-1, PROV-2, PROV-5).
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from sqlalchemy import select
from tests.support.model_server import RemoteModelServer, prompt_tokens
from tests.support.runs import finished_run
from tests.support.serve import ServeProcess, model_server_process

from chatmem.store.db import Database
from chatmem.store.tables.runs import UsageRow

pytestmark = pytest.mark.slow

WINDOW = 8192
BOUND = 64 * 1024


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    state = tmp_path_factory.mktemp("serve-providers")
    server = ServeProcess(state, CHATMEM_MAX_ANSWER_BYTES=str(BOUND))
    with model_server_process() as model:
        server.start()
        db = Database(server.database_url)
        api = server.signed_in("ann")
        try:
            created = api.post(
                "/api/v1/profiles",
                json={
                    "name": "llama.cpp",
                    "base_url": model.base_url,
                    "model": "gemma-3-270m",
                    "context_window": WINDOW,
                    "answer_reserve": 1024,
                    "input_price_per_mtok": 1.0,
                    "output_price_per_mtok": 2.0,
                },
            )
            assert created.status_code == 201, created.text
            yield {"api": api, "model": model, "db": db, "profile_id": created.json()["id"]}
        finally:
            api.close()
            db.dispose()
            server.stop()


@pytest.fixture
def chat(world: dict[str, Any]) -> Iterator[str]:
    model: RemoteModelServer = world["model"]
    model.reset()
    response = world["api"].post(
        "/api/v1/conversations", json={"title": "t", "profile_id": world["profile_id"]}
    )
    assert response.status_code == 201, response.text
    yield str(response.json()["id"])
    model.reset()


def turn(api: httpx.Client, conversation_id: str, content: str) -> dict[str, Any]:
    response = api.post(f"/api/v1/conversations/{conversation_id}/turns", json={"content": content})
    assert response.status_code == 202, response.text
    return finished_run(api, response.json()["run_id"])


def deltas(api: httpx.Client, run_id: str) -> str:
    text: list[str] = []
    with api.stream("GET", f"/api/v1/runs/{run_id}/events") as response:
        kind = None
        for line in response.iter_lines():
            if line.startswith("event: "):
                kind = line[7:]
            elif line.startswith("data: ") and kind == "delta":
                text.append(json.loads(line[6:])["text"])
    return "".join(text)


def ledger(db: Database, conversation_id: str) -> list[tuple[str, int, int, float, bool]]:
    with db.session() as session:
        return [
            (r.kind, r.prompt_tokens, r.completion_tokens, r.cost, r.estimated)
            for r in session.scalars(
                select(UsageRow)
                .where(UsageRow.conversation_id == conversation_id)
                .order_by(UsageRow.num)
            )
        ]


def prose(chars: int) -> str:
    rng = random.Random(3)
    words = ["the", "kitchen", "budget", "is", "grey", "oak", "tiles", "and", "a", "window"]
    out: list[str] = []
    while sum(len(w) + 1 for w in out) < chars:
        out.append(rng.choice(words))
    return " ".join(out)


def test_a_llama_cpp_like_server_is_counted_and_its_overflow_never_sticks(
    world: dict[str, Any], chat: str
) -> None:
    api: httpx.Client = world["api"]
    model: RemoteModelServer = world["model"]
    model.report_usage(False)
    model.limit_context(WINDOW, style="llama_cpp")

    # PROV-1: no usage in the stream; the answer is counted and billed, marked estimated.
    first = turn(api, chat, "Hello, what can you do?")
    assert first["status"] == "completed"
    assert first["usage"]["completion_tokens"] > 0 and first["cost"] > 0
    [(kind, prompt, completion, cost, estimated)] = ledger(world["db"], chat)
    assert (kind, estimated) == ("answer", True) and prompt > 0 and completion > 0 and cost > 0

    # PROV-2: a prompt beyond the server's context: empty stream, probe, the context advice.
    big = prose(10_000)
    failed = turn(api, chat, big)
    assert failed["status"] == "failed"
    assert failed["error"]["code"] == "context_length_exceeded"
    assert "Economy" in failed["error"]["message"]
    requests = [r for r in model.requests if r.path.endswith("/chat/completions")]
    assert requests[-2].body["stream"] is True and requests[-1].body["max_tokens"] == 1
    sent_before = len(requests)

    # Recalibrated at once: the same message is refused before sending (the plan agrees) …
    plan = api.get(f"/api/v1/conversations/{chat}/context", params={"draft": big}).json()
    assert plan["fits"] is False
    refused = api.post(f"/api/v1/conversations/{chat}/turns", json={"content": big})
    assert refused.status_code == 413 and refused.json()["error"]["code"] == "does_not_fit"
    # … and a short one folds the history and is answered.
    after = turn(api, chat, "Short question then: which tiles?")
    assert after["status"] == "completed", after
    requests = [r for r in model.requests if r.path.endswith("/chat/completions")]
    assert len(requests) > sent_before
    assert all(prompt_tokens(r.body) <= WINDOW for r in requests[sent_before:])
    rows = ledger(world["db"], chat)
    assert ("overflow", prompt_tokens(requests[sent_before - 1].body)) in {
        (r[0], r[1]) for r in rows
    }
    assert all(r[2] > 0 and r[3] > 0 and r[4] for r in rows if r[0] != "overflow")


def test_a_runaway_answer_is_stopped_at_the_configured_bound(
    world: dict[str, Any], chat: str
) -> None:
    api: httpx.Client = world["api"]
    model: RemoteModelServer = world["model"]
    model.large_reply(5_000_000)
    run = turn(api, chat, "Tell me everything")
    assert run["status"] == "failed" and run["error"]["code"] == "answer_too_large"
    items = api.get(f"/api/v1/conversations/{chat}/messages").json()["items"]
    kept = [m for m in items if m["role"] == "assistant"][-1]
    assert len(kept["content"].encode()) == BOUND
    assert deltas(api, run["id"]) == kept["content"]
    model.reply("Short.")
    assert turn(api, chat, "Shorter")["status"] == "completed"


def test_a_local_reasoning_model_without_tool_calling_through_serve(
    world: dict[str, Any], chat: str
) -> None:
    """llama.cpp's server without ``--jinja`` refuses tools (a 500), and a Qwen3-like model
    leaves its thinking in the text: the chat answers (recall dropped, the profile saying
    so), the watchers see the thinking as ``reasoning`` events, the message keeps it beside
    the answer, and the next request carries the answer alone."""
    api: httpx.Client = world["api"]
    model: RemoteModelServer = world["model"]
    model.refuse_tools("llama_cpp")
    model.reply("<think>They greet me; greet back.</think>\n\nHello!")
    run = turn(api, chat, "Hi there")
    assert run["status"] == "completed", run
    kinds: list[str] = []
    with api.stream("GET", f"/api/v1/runs/{run['id']}/events") as response:
        kinds = [line[7:] for line in response.iter_lines() if line.startswith("event: ")]
    assert kinds.index("reasoning") < kinds.index("delta")
    items = api.get(f"/api/v1/conversations/{chat}/messages").json()["items"]
    assert (items[-1]["content"], items[-1]["reasoning"]) == (
        "Hello!",
        "They greet me; greet back.",
    )
    assert api.get(f"/api/v1/profiles/{world['profile_id']}").json()["recall"] is False
    assert turn(api, chat, "How are you?")["status"] == "completed"
    last = [r for r in model.requests if r.path.endswith("/chat/completions")][-1]
    assert "tools" not in last.body
    assert {"role": "assistant", "content": "Hello!"} in last.body["messages"]
    api.patch(f"/api/v1/profiles/{world['profile_id']}", json={"recall": None})
