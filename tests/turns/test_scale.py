"""SCALE-2: two app instances sharing PostgreSQL and Redis act as one service.

A turn started through one instance is watched and stopped through the other, and a run
whose replica died is marked ``interrupted`` by a surviving one.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from tests.conftest import skip_or_fail
from tests.support.app import _PostgresPool
from tests.support.model_server import FakeModelServer
from tests.support.runs import finished_run
from tests.turns.conftest import Chat, make_chat

from chatmem.settings import Settings
from chatmem.store import runs
from chatmem.store.tables.runs import Run
from chatmem.web.app import create_app

REDIS_URL = "redis://127.0.0.1:6379/0"
pytestmark = [pytest.mark.redis, pytest.mark.postgres]


def _redis_available() -> None:
    import redis

    try:
        redis.Redis.from_url(REDIS_URL).ping()
    except Exception as exc:
        skip_or_fail(f"Redis not reachable at {REDIS_URL}: {type(exc).__name__}")


@pytest.fixture
def replicas(
    _postgres_pool: _PostgresPool, clean_environ: Path
) -> Iterator[tuple[TestClient, TestClient]]:
    _redis_available()
    url = _postgres_pool.open()
    settings = Settings(
        state_dir=clean_environ,
        database_url=url,
        redis_url=REDIS_URL,
        allow_private_endpoints=True,
        encryption_key="tMLcDwJ6lqF8x0lvVYQ3bE8yyf0H4bNwE0qF4h7Zr2c=",
    )
    try:
        with TestClient(create_app(settings)) as a, TestClient(create_app(settings)) as b:
            yield a, b
    finally:
        _postgres_pool.empty()


def test_turn_started_on_one_replica_is_watched_and_stopped_on_another_SCALE_2(
    replicas: tuple[TestClient, TestClient], model_server: FakeModelServer
) -> None:
    a, b = replicas
    assert a.app.state.turns.coordinator.replica_id != b.app.state.turns.coordinator.replica_id  # type: ignore[attr-defined]
    on_a = make_chat(a, model_server)
    on_b = Chat(b, on_a.user, model_server, on_a.profile_id, on_a.conversation_id)
    model_server.reply(" ".join(f"w{i}" for i in range(60)), delay=0.05)
    run_id = on_a.start("Long one")
    seen = on_b.events(run_id, limit=4)
    assert [e["event"] for e in seen] == ["delta"] * 4
    # Refused on the other replica too: one turn per conversation across replicas.
    assert on_b.submit("Parallel").json()["error"]["code"] == "turn_running"
    stopped = b.post(f"/api/v1/runs/{run_id}/stop", headers=on_b.headers)
    assert stopped.status_code == 200
    assert stopped.json()["status"] == "stopped"
    kept = on_b.messages()[-1]["content"]
    assert kept.startswith("".join(e["data"]["text"] for e in seen))
    replay = on_b.events(run_id)
    assert replay[-1]["event"] == "done" and replay[-1]["data"]["status"] == "stopped"
    # The conversation lock was released across replicas.
    model_server.reply("next")
    assert finished_run(b, on_b.start("Next"), on_b.headers)["status"] == "completed"


def test_a_dead_replicas_run_is_interrupted_by_a_survivor_SCALE_2(
    replicas: tuple[TestClient, TestClient], model_server: FakeModelServer
) -> None:
    a, b = replicas
    chat = make_chat(a, model_server)
    with a.app.state.db.session() as session:  # type: ignore[attr-defined]
        run_id = runs.start_run(
            session,
            user_id=chat.user.id,
            conversation_id=chat.conversation_id,
            user_message_id=None,
            replica_id="replica-that-died",
        )
    interrupted = b.portal.call(b.app.state.turns.recover)  # type: ignore[attr-defined,union-attr]
    assert run_id in interrupted
    with a.app.state.db.session() as session:  # type: ignore[attr-defined]
        assert session.get(Run, run_id).status == "interrupted"  # type: ignore[union-attr]
    # Runs owned by a live replica are left alone.
    model_server.reply("slow " * 20, delay=0.05)
    live = chat.start("Live")
    assert live not in b.portal.call(b.app.state.turns.recover)  # type: ignore[attr-defined,union-attr]
    assert finished_run(a, live, chat.headers)["status"] == "completed"
