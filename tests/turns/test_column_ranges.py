"""What a client sends back to page or resume — a sequence number, a list cursor — is checked
against what the database holds before it reaches a statement (SEC-1), on both backends.

A sequence number is a 32-bit ``Integer`` column on PostgreSQL, so ``?after_seq=2**31``
answered 500 ``NumericValueOutOfRange`` there (SQLite took any 64-bit value); a forged list
cursor with a NUL or a lone surrogate in its id, or a time that leaves the calendar in UTC,
answered 500 too.  Each answers 422 ``invalid_input`` now, and the largest value in range
still answers."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from tests.turns.conftest import Chat

OUT_OF_RANGE = [str(2**31), str(2**63 - 1), str(2**63), "-1", str(-(2**31) - 1), str(-(2**63))]


def _refused(response: Any) -> None:
    assert response.status_code == 422, (response.status_code, response.text)
    assert response.json()["error"]["code"] == "invalid_input", response.text


@pytest.mark.parametrize("value", OUT_OF_RANGE)
def test_a_message_sequence_number_out_of_range_is_refused(chat: Chat, value: str) -> None:
    path = f"/api/v1/conversations/{chat.conversation_id}/messages"
    _refused(chat.client.get(path, params={"after_seq": value}, headers=chat.headers))


@pytest.mark.parametrize("value", OUT_OF_RANGE)
def test_an_event_sequence_number_out_of_range_is_refused(chat: Chat, value: str) -> None:
    run_id = chat.start("hello")
    chat.wait(run_id)
    path = f"/api/v1/runs/{run_id}/events"
    _refused(chat.client.get(path, params={"after": value}, headers=chat.headers))
    _refused(chat.client.get(path, headers={**chat.headers, "Last-Event-ID": value}))


def test_the_largest_sequence_number_in_range_still_answers(chat: Chat) -> None:
    run_id = chat.start("hello")
    chat.wait(run_id)
    top = str(2**31 - 1)
    page = chat.client.get(
        f"/api/v1/conversations/{chat.conversation_id}/messages",
        params={"after_seq": top},
        headers=chat.headers,
    )
    assert page.status_code == 200 and page.json()["items"] == [], page.text
    for how in ({"params": {"after": top}}, {"headers": {"Last-Event-ID": top}}):
        headers = {**chat.headers, **how.get("headers", {})}
        events = chat.client.get(
            f"/api/v1/runs/{run_id}/events", params=how.get("params"), headers=headers
        )
        assert events.status_code == 200, events.text


def _cursor(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


@pytest.mark.parametrize(
    "raw",
    [
        b'[1,"2026-01-01T00:00:00+00:00","a\\u0000b"]',
        b'[1,"2026-01-01T00:00:00+00:00","a\\ud800b"]',
        b'[1,"0001-01-01T00:00:00+14:00","x"]',
        b'[1,"9999-12-31T23:59:59-14:00","x"]',
        b'[1,"2026-01-01T00:00:00+00:00",["x"]]',
        b'[7,"2026-01-01T00:00:00+00:00","x"]',
        b"[" * 400 + b"]" * 400,
        b'[1,"2026-01-01T00:00:00+00:00","' + b"x" * 600 + b'"]',
    ],
    ids=["nul", "surrogate", "before-year-1", "after-year-9999", "list", "pinned", "deep", "long"],
)
def test_a_forged_list_cursor_is_refused(chat: Chat, raw: bytes) -> None:
    response = chat.client.get(
        "/api/v1/conversations", params={"cursor": _cursor(raw)}, headers=chat.headers
    )
    _refused(response)


def test_a_cursor_the_server_wrote_still_pages(chat: Chat) -> None:
    for title in ("a", "b", "c"):
        created = chat.client.post(
            "/api/v1/conversations", json={"title": title}, headers=chat.headers
        )
        assert created.status_code == 201, created.text
    first = chat.client.get("/api/v1/conversations", params={"limit": 2}, headers=chat.headers)
    cursor = first.json()["next_cursor"]
    assert cursor is not None
    rest = chat.client.get(
        "/api/v1/conversations", params={"limit": 2, "cursor": cursor}, headers=chat.headers
    )
    assert rest.status_code == 200, rest.text
    seen = [c["id"] for c in first.json()["items"] + rest.json()["items"]]
    assert len(seen) == len(set(seen)) == 4  # the chat's own conversation and three more
