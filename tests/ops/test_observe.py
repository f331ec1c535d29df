"""Issue 31 §2: request ids, the turn's log lines, /healthz, /readyz and /metrics."""

from __future__ import annotations

import io
import json
import logging
import re
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import text
from tests.support.app import make_user
from tests.support.model_server import FakeModelServer
from tests.turns.conftest import make_chat

from chatmem.settings import Settings
from chatmem.store.db import Database
from chatmem.telemetry.logs import RequestIdFilter, configure_logging, request_id
from chatmem.web.app import create_app

SECRET_QUESTION = "my passport number is X1234567, keep it"


@pytest.fixture
def api(settings: Settings) -> Iterator[TestClient]:
    ops = settings.model_copy(
        update={"allow_private_endpoints": True, "metrics_token": "scrape-me"}
    )
    with TestClient(create_app(ops)) as client:
        yield client


def test_every_answer_names_its_request_id(api: TestClient) -> None:
    made = api.get("/healthz").headers["x-request-id"]
    assert re.fullmatch(r"[0-9a-f]{32}", made)
    kept = api.get("/healthz", headers={"X-Request-Id": "edge-42.a:b_c"})
    assert kept.headers["x-request-id"] == "edge-42.a:b_c"
    # Not a plain token (or too long): replaced, never echoed into headers or logs.
    for bad in ("a b", "x" * 129, "<script>"):
        replaced = api.get("/healthz", headers={"X-Request-Id": bad})
        assert replaced.headers["x-request-id"] != bad
    assert api.get("/api/v1/nothing-here").headers["x-request-id"]


def test_readyz_is_ready_then_says_why_not(api: TestClient) -> None:
    assert api.get("/healthz").json() == {"status": "ok"}
    ready = api.get("/readyz")
    assert ready.status_code == 200
    assert ready.json() == {"status": "ready"}
    db: Database = api.app.state.db  # type: ignore[attr-defined]
    with db.engine.begin() as connection:
        connection.execute(text("UPDATE alembic_version SET version_num = '0001_core'"))
    try:
        behind = api.get("/readyz")
        assert behind.status_code == 503
        error = behind.json()["error"]
        assert error["code"] == "not_ready"
        assert "schema" in error["message"] and "0001_core" in error["message"]
    finally:
        with db.engine.begin() as connection:
            connection.execute(
                text("UPDATE alembic_version SET version_num = :v"), {"v": db.head_revision()}
            )
    assert api.get("/readyz").status_code == 200


def test_metrics_are_for_administrators_and_the_metrics_token(api: TestClient) -> None:
    alice = make_user(api, "alice")
    root = make_user(api, "root", admin=True)
    assert api.get("/metrics").status_code == 401
    assert api.get("/metrics", headers=alice.headers).status_code == 403
    assert api.get("/metrics", headers={"Authorization": "Bearer wrong"}).status_code == 401
    api.get("/api/v1/conversations", headers=alice.headers)
    for headers in (root.headers, {"Authorization": "Bearer scrape-me"}):
        scraped = api.get("/metrics", headers=headers)
        assert scraped.status_code == 200
        assert scraped.headers["content-type"].startswith("text/plain")
        body = scraped.text
        assert re.search(
            r'chatmem_http_requests_total\{method="GET",route="/api/v1/conversations",'
            r'status="200"\} 1\.0',
            body,
        ), body
        # A route's template, never the path a client sent.
        assert 'route="/api/v1/nothing' not in body


def _metric(body: str, name: str, **labels: str) -> float:
    for line in body.splitlines():
        if not line.startswith(name):
            continue
        head, _, value = line.rpartition(" ")
        if all(f'{k}="{v}"' in head for k, v in labels.items()):
            return float(value)
    return 0.0


def test_a_turn_is_logged_and_counted_without_its_text(
    api: TestClient, model_server: FakeModelServer, caplog: pytest.LogCaptureFixture
) -> None:
    chat = make_chat(api, model_server, admin=True)
    model_server.reply("Noted.", usage=(120, 7))
    caplog.set_level(logging.INFO)
    caplog.handler.addFilter(RequestIdFilter())  # as configure_logging's handler has it
    response = chat.submit(SECRET_QUESTION, **{"X-Request-Id": "turn-req-1"})
    assert response.status_code == 202
    run_id = response.json()["run_id"]
    assert chat.wait(run_id)["status"] == "completed"

    ended = [r for r in caplog.records if r.getMessage() == "turn ended"]
    assert len(ended) == 1
    line = vars(ended[0])
    assert line["run_id"] == run_id
    assert line["outcome"] == "completed"
    assert line["profile"] == chat.profile_id
    assert (line["prompt_tokens"], line["completion_tokens"]) == (120, 7)
    assert line["ttft_ms"] is not None and line["duration_ms"] >= line["ttft_ms"]
    # The turn's lines carry the id of the request that started it.
    started = [r for r in caplog.records if r.getMessage() == "turn started"]
    assert [getattr(r, "request_id", None) for r in started] == ["turn-req-1"]
    for record in caplog.records:
        assert "X1234567" not in record.getMessage()
        assert "X1234567" not in json.dumps(vars(record), default=str)

    body = api.get("/metrics", headers=chat.headers).text
    assert _metric(body, "chatmem_turns_total", outcome="completed") == 1
    assert _metric(body, "chatmem_tokens_total", profile=chat.profile_id, kind="prompt") == 120
    assert _metric(body, "chatmem_tokens_total", profile=chat.profile_id, kind="completion") == 7
    assert _metric(body, "chatmem_turn_first_token_seconds_count") == 1
    assert _metric(body, "chatmem_cost_usd_total", profile=chat.profile_id) > 0
    assert _metric(body, "chatmem_turns_running") == 0
    assert _metric(body, "chatmem_sse_watchers") == 0  # the watcher's stream closed


def test_json_lines_carry_the_request_id() -> None:
    stream = io.StringIO()
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    try:
        configure_logging("INFO", "json", stream)
        token = request_id.set("req-7")
        try:
            logging.getLogger("chatmem.test").info("hello %s", "there", extra={"run_id": "r1"})
        finally:
            request_id.reset(token)
        logging.getLogger("chatmem.test").debug("not at INFO")
    finally:
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert len(lines) == 1
    assert lines[0]["message"] == "hello there"
    assert lines[0]["request_id"] == "req-7"
    assert lines[0]["run_id"] == "r1"
    assert lines[0]["level"] == "INFO"
    assert lines[0]["logger"] == "chatmem.test"
