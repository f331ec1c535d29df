"""A new question's first model request leaves before the question is written
(``chatmem.turns.early``): the provider reads while the server writes — and nothing is shown
before it is stored, and a question that cannot be written cancels its request."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from tests.support.model_server import FakeModelServer, RecordedRequest
from tests.support.runs import finished_run
from tests.turns.conftest import Chat

from chatmem.errors import NotFound
from chatmem.store.tables.conversations import Conversation
from chatmem.turns.early import EarlyStream
from chatmem.turns.service import TurnService

WAIT = 10.0  # seconds: a bound for waits on events, never reached when the code is right


def _watch_requests(model: FakeModelServer, monkeypatch: pytest.MonkeyPatch) -> threading.Event:
    """An event set when the fake provider has received a chat request."""
    received = threading.Event()
    record = model._record

    def recorded(request: RecordedRequest) -> None:
        record(request)
        if request.path.endswith("/chat/completions"):
            received.set()

    monkeypatch.setattr(model, "_record", recorded)
    return received


def test_the_provider_has_the_question_before_it_is_written(
    chat: Chat, monkeypatch: pytest.MonkeyPatch
) -> None:
    received = _watch_requests(chat.model, monkeypatch)
    seen_while_writing: list[bool] = []
    record = TurnService._record

    def writing(self: TurnService, session: Any, *args: Any, **kwargs: Any) -> None:
        # The request left before this write began: the provider gets it without waiting.
        seen_while_writing.append(received.wait(WAIT))
        record(self, session, *args, **kwargs)

    monkeypatch.setattr(TurnService, "_record", writing)
    chat.model.reply("Early and whole.")
    run = finished_run(chat.client, chat.start("Hello"), chat.headers)

    assert seen_while_writing == [True]
    assert run["status"] == "completed"
    assert [(m["role"], m["content"]) for m in chat.messages()] == [
        ("user", "Hello"),
        ("assistant", "Early and whole."),
    ]
    assert len(chat.model.chat_requests) == 1  # the early request is the turn's only one
    assert chat.model.chat_requests[0].messages[-1] == {"role": "user", "content": "Hello"}


def test_a_question_that_cannot_be_written_cancels_its_request_and_stores_nothing(
    chat: Chat, monkeypatch: pytest.MonkeyPatch
) -> None:
    received = _watch_requests(chat.model, monkeypatch)
    closed: list[EarlyStream] = []
    aclose = EarlyStream.aclose

    async def closing(self: EarlyStream) -> None:
        await aclose(self)
        closed.append(self)

    monkeypatch.setattr(EarlyStream, "aclose", closing)
    record = TurnService._record

    def deleted_meanwhile(self: TurnService, session: Any, *args: Any, **kwargs: Any) -> None:
        assert received.wait(WAIT)
        # The conversation is deleted in the write's transaction: the insert finds no
        # conversation and the unit fails (rolled back whole, the deletion with it).
        session.delete(session.get(Conversation, chat.conversation_id))
        session.flush()
        record(self, session, *args, **kwargs)

    monkeypatch.setattr(TurnService, "_record", deleted_meanwhile)
    chat.model.reply("never shown " * 100, delay=0.05)  # still streaming when cancelled
    response = chat.submit("Lost?")

    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"
    assert len(closed) == 1 and closed[0]._task.cancelled()  # the request was cut off
    service: TurnService = chat.client.app.state.turns  # type: ignore[attr-defined]
    assert service._live == {}  # no run started
    runs = chat.client.get(
        f"/api/v1/conversations/{chat.conversation_id}/runs", headers=chat.headers
    )
    assert runs.json()["items"] == []
    assert chat.messages() == []


def test_record_failure_is_the_refusal_the_client_gets(
    chat: Chat, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The write's refusal reaches the client as it is, and the conversation is free for the
    next question (its lock released, the early request closed)."""

    def refused(self: TurnService, session: Any, *args: Any, **kwargs: Any) -> None:
        raise NotFound("conversation")

    with monkeypatch.context() as patch:
        patch.setattr(TurnService, "_record", refused)
        assert chat.submit("First").status_code == 404
    chat.model.reply("Second answer.")
    run = finished_run(chat.client, chat.start("Second"), chat.headers)
    assert run["status"] == "completed"
    assert [m["content"] for m in chat.messages()] == ["Second", "Second answer."]
