"""Fixtures for the turn tests: an app that may call the loopback fake model server."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from fastapi.testclient import TestClient
from tests.support.app import ApiUser, make_user
from tests.support.model_server import FakeModelServer

from chatmem.settings import Settings
from chatmem.web.app import create_app


@dataclass
class Chat:
    """A signed-in user with a profile on the fake model server and one conversation."""

    client: TestClient
    user: ApiUser
    model: FakeModelServer
    profile_id: str
    conversation_id: str

    @property
    def headers(self) -> dict[str, str]:
        return self.user.headers

    def submit(self, content: str, **headers: str) -> Any:
        return self.client.post(
            f"/api/v1/conversations/{self.conversation_id}/turns",
            json={"content": content},
            headers={**self.headers, **headers},
        )

    def start(self, content: str) -> str:
        response = self.submit(content)
        assert response.status_code == 202, response.text
        return str(response.json()["run_id"])

    def run(self, run_id: str) -> dict[str, Any]:
        return self.client.get(f"/api/v1/runs/{run_id}", headers=self.headers).json()

    def wait(self, run_id: str, timeout: float = 15.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            run = self.run(run_id)
            if run["status"] != "running":
                return run
            time.sleep(0.02)
        raise AssertionError(f"run {run_id} still running")

    def turn(self, content: str) -> dict[str, Any]:
        return self.wait(self.start(content))

    def events(
        self, run_id: str, *, after: int | None = None, limit: int | None = None
    ) -> list[dict[str, Any]]:
        headers = dict(self.headers)
        if after is not None:
            headers["Last-Event-ID"] = str(after)
        out: list[dict[str, Any]] = []
        with self.client.stream(
            "GET", f"/api/v1/runs/{run_id}/events", headers=headers
        ) as response:
            assert response.status_code == 200, response.read()
            assert response.headers["content-type"].startswith("text/event-stream")
            for event in parse_sse(response.iter_lines()):
                out.append(event)
                if limit is not None and len(out) >= limit:
                    break
        return out

    def messages(self) -> list[dict[str, Any]]:
        """The stored history, read from the database (what was durably written)."""
        from chatmem.store.messages import history

        with self.client.app.state.db.session() as session:  # type: ignore[attr-defined]
            return [
                {
                    "id": m.id,
                    "role": m.role,
                    "content": m.content,
                    "tool_calls": m.tool_calls,
                    "tool_call_id": m.tool_call_id,
                    "meta": m.meta or {},
                }
                for m in history(session, self.conversation_id)
            ]

    def set(self, **changes: Any) -> None:
        response = self.client.patch(
            f"/api/v1/conversations/{self.conversation_id}", json=changes, headers=self.headers
        )
        assert response.status_code == 200, response.text


class SseParser:
    """Server-Sent Events, a line at a time: :meth:`feed` returns ``{"id", "event", "data"}``
    when a line ends an event, else None."""

    def __init__(self) -> None:
        self._event: dict[str, Any] = {}

    def feed(self, line: str) -> dict[str, Any] | None:
        if not line:
            event, self._event = self._event, {}
            return event or None
        field, _, value = line.partition(": ")
        if field == "id":
            self._event["id"] = int(value)
        elif field == "event":
            self._event["event"] = value
        elif field == "data":
            self._event["data"] = json.loads(value)
        return None

    def rest(self) -> dict[str, Any] | None:
        """An event the stream ended in the middle of (no blank line after it)."""
        event, self._event = self._event, {}
        return event or None


def parse_sse(lines: Any) -> Iterator[dict[str, Any]]:
    parser = SseParser()
    for line in lines:
        event = parser.feed(line)
        if event is not None:
            yield event
    event = parser.rest()
    if event is not None:
        yield event


@pytest.fixture
def turn_settings(settings: Settings) -> Settings:
    return settings.model_copy(update={"allow_private_endpoints": True})


@pytest.fixture
def turn_client(turn_settings: Settings) -> Iterator[TestClient]:
    with TestClient(create_app(turn_settings)) as client:
        yield client


def make_chat(
    client: TestClient,
    model: FakeModelServer,
    *,
    name: str = "alice",
    mode: str = "full",
    admin: bool = False,
    profile: dict[str, Any] | None = None,
) -> Chat:
    user = make_user(client, name, admin=admin)
    body = {
        "name": "fake",
        "base_url": model.base_url,
        "model": "fake-model",
        "api_key": "sk-test",
        "input_price_per_mtok": 1.0,
        "output_price_per_mtok": 2.0,
        **(profile or {}),
    }
    response = client.post("/api/v1/profiles", json=body, headers=user.headers)
    assert response.status_code == 201, response.text
    profile_id = response.json()["id"]
    response = client.post(
        "/api/v1/conversations",
        json={"title": "t", "mode": mode, "profile_id": profile_id},
        headers=user.headers,
    )
    assert response.status_code == 201, response.text
    return Chat(client, user, model, profile_id, response.json()["id"])


@pytest.fixture
def chat(turn_client: TestClient, model_server: FakeModelServer) -> Chat:
    return make_chat(turn_client, model_server)


def seed_pairs(chat: Chat, count: int, *, start: int = 1) -> None:
    """Stores ``count`` question–answer pairs directly (fast set-up for memory tests)."""
    from chatmem.store.messages import append_message
    from chatmem.store.tables.conversations import Conversation

    with chat.client.app.state.db.session() as session:  # type: ignore[attr-defined]
        row = session.get(Conversation, chat.conversation_id)
        assert row is not None
        for i in range(start, start + count):
            append_message(session, row, "user", f"Question {i}: what is {i} squared?")
            append_message(session, row, "assistant", f"Answer {i}: {i * i}.")


def summaries(chat: Chat) -> list[tuple[int, str, str]]:
    from sqlalchemy import select

    from chatmem.store.tables.conversations import Summary

    with chat.client.app.state.db.session() as session:  # type: ignore[attr-defined]
        return [
            (s.version, s.text, s.through_message_id)
            for s in session.scalars(
                select(Summary)
                .where(Summary.conversation_id == chat.conversation_id)
                .order_by(Summary.version)
            )
        ]
