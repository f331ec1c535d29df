"""Issue 13, findings 4 and 5, end to end on SQLite and PostgreSQL: hostile values answer 4xx
``invalid_input`` and write nothing — never a 500 — and no response carries Infinity or NaN.

Each case here answered 500 (or 200 with invalid JSON) before SEC-1's bounds.
"""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from tests.turns.conftest import Chat

from chatmem.store.tables.conversations import Conversation, Folder, Message
from chatmem.store.tables.runs import Run

JSON = {"Content-Type": "application/json"}


def _post(chat: Chat, path: str, raw: bytes) -> Any:
    return chat.client.post(path, content=raw, headers={**chat.headers, **JSON})


def _refused(response: Any) -> None:
    assert response.status_code in (400, 422), (response.status_code, response.text)
    assert response.json()["error"]["code"] == "invalid_input", response.text


def _counts(chat: Chat) -> tuple[int, int, int, int]:
    from sqlalchemy import func, select

    with chat.client.app.state.db.session() as session:  # type: ignore[attr-defined]
        return tuple(  # type: ignore[return-value]
            session.scalar(select(func.count()).select_from(table)) or 0
            for table in (Conversation, Folder, Message, Run)
        )


def _strict_json(text: str) -> Any:
    """Parses as browsers do: Infinity and NaN are not JSON."""

    def refuse(name: str) -> Any:
        raise AssertionError(f"{name} in a response")

    return json.loads(text, parse_constant=refuse)


def test_finding4_lone_surrogate_in_a_folder_name_is_refused(chat: Chat) -> None:
    before = _counts(chat)
    _refused(_post(chat, "/api/v1/folders", b'{"name":"\\ud800x"}'))
    _refused(_post(chat, "/api/v1/folders", b'{"name":"x\\udfff"}'))
    assert _counts(chat) == before


def test_finding4_a_huge_offset_is_refused(chat: Chat) -> None:
    for path in (
        "/api/v1/conversations?offset=99999999999999999999999",
        "/api/v1/archive?offset=99999999999999999999999",
        f"/api/v1/conversations/{chat.conversation_id}/messages?after_seq=99999999999999999999999",
    ):
        _refused(chat.client.get(path, headers=chat.headers))
    # The largest offset both databases take still answers (an empty page).
    page = chat.client.get(f"/api/v1/conversations?offset={2**63 - 1}", headers=chat.headers)
    assert page.status_code == 200 and page.json()["items"] == []


def test_finding4_a_huge_last_event_id_is_refused(chat: Chat) -> None:
    run_id = chat.start("hello")
    chat.wait(run_id)
    for value in ("99999999999999999999999", str(2**63)):
        response = chat.client.get(
            f"/api/v1/runs/{run_id}/events", headers={**chat.headers, "Last-Event-ID": value}
        )
        _refused(response)
        _refused(
            chat.client.get(f"/api/v1/runs/{run_id}/events?after={value}", headers=chat.headers)
        )


@pytest.mark.parametrize("text", ["a\\u0000b", "\\u0000", "a\\ud800", "\\udc00b"])
def test_finding4_nul_or_a_lone_surrogate_anywhere_is_refused_and_nothing_written(
    chat: Chat, text: str
) -> None:
    cid = chat.conversation_id
    folder = chat.client.post("/api/v1/folders", json={"name": "f"}, headers=chat.headers).json()
    message = chat.client.post(
        f"/api/v1/conversations/{cid}/messages",
        json={"role": "user", "content": "kept"},
        headers=chat.headers,
    )
    assert message.status_code == 201, message.text
    before = _counts(chat)
    quoted = f'"{text}"'.encode()
    for method, path, raw in [
        ("POST", "/api/v1/conversations", b'{"title":' + quoted + b"}"),
        ("PATCH", f"/api/v1/conversations/{cid}", b'{"title":' + quoted + b"}"),
        ("POST", "/api/v1/folders", b'{"name":' + quoted + b"}"),
        ("PATCH", f"/api/v1/folders/{folder['id']}", b'{"name":' + quoted + b"}"),
        (
            "POST",
            f"/api/v1/conversations/{cid}/messages",
            b'{"role":"user","content":' + quoted + b"}",
        ),
        ("POST", f"/api/v1/conversations/{cid}/turns", b'{"content":' + quoted + b"}"),
        ("PUT", f"/api/v1/conversations/{cid}/summary", b'{"text":' + quoted + b"}"),
        ("POST", "/api/v1/conversations", b'{"title":"ok",' + quoted + b":1}"),
    ]:
        response = chat.client.request(method, path, content=raw, headers={**chat.headers, **JSON})
        _refused(response)
    assert _counts(chat) == before
    assert (
        chat.client.get(f"/api/v1/conversations/{cid}", headers=chat.headers).json()["title"] == "t"
    )


def test_finding4_nul_in_a_url_is_refused(chat: Chat) -> None:
    for path in (
        "/api/v1/conversations?q=a%00b",
        "/api/v1/conversations/a%00b",
        "/api/v1/conversations?folder_id=%00",
        f"/api/v1/conversations/{chat.conversation_id}/context?draft=%00",
    ):
        _refused(chat.client.get(path, headers=chat.headers))


def test_finding4_nul_in_an_uploaded_file_is_refused(chat: Chat) -> None:
    before = _counts(chat)
    response = chat.client.post(
        f"/api/v1/conversations/{chat.conversation_id}/files",
        files={"file": ("a.txt", b"text\x00more", "text/plain")},
        headers=chat.headers,
    )
    _refused(response)
    assert (
        chat.client.get(
            f"/api/v1/conversations/{chat.conversation_id}/messages", headers=chat.headers
        ).json()["files"]
        == []
    )
    assert _counts(chat) == before


@pytest.mark.parametrize(
    "value", [b"1e999", b"-1e999", b"NaN", b"Infinity", b"10001", b"-1", b"1" + b"0" * 400]
)
def test_finding5_prices_are_finite_and_in_range(chat: Chat, value: bytes) -> None:
    path = f"/api/v1/profiles/{chat.profile_id}"
    for field in (b"input_price_per_mtok", b"output_price_per_mtok"):
        response = chat.client.patch(
            path, content=b'{"' + field + b'": ' + value + b"}", headers={**chat.headers, **JSON}
        )
        _refused(response)
        assert field.decode() in response.json()["error"]["message"]
    profile = chat.client.get(path, headers=chat.headers).json()
    assert (profile["input_price_per_mtok"], profile["output_price_per_mtok"]) == (1.0, 2.0)
    created = _post(
        chat,
        "/api/v1/profiles",
        b'{"name":"n","base_url":"http://127.0.0.1:9/v1","model":"m","input_price_per_mtok":'
        + value
        + b"}",
    )
    _refused(created)
    # The highest accepted price still plans and answers in valid JSON.
    ok = chat.client.patch(path, json={"input_price_per_mtok": 10_000}, headers=chat.headers)
    assert ok.status_code == 200, ok.text


def test_finding5_context_and_usage_never_carry_infinity(chat: Chat) -> None:
    """A stored price out of range (written by an older version) is ignored as if unset, and
    every JSON answer parses strictly."""
    from sqlalchemy import update

    from chatmem.store.tables.profiles import ModelProfile

    with chat.client.app.state.db.session() as session:  # type: ignore[attr-defined]
        session.execute(
            update(ModelProfile).values(input_price_per_mtok=math.inf, output_price_per_mtok=1e300)
        )
    chat.wait(chat.start("hello"))
    for path in (
        f"/api/v1/conversations/{chat.conversation_id}/context?draft=hi",
        f"/api/v1/profiles/{chat.profile_id}/context?draft=hi",
        f"/api/v1/profiles/{chat.profile_id}",
        "/api/v1/usage",
    ):
        response = chat.client.get(path, headers=chat.headers)
        assert response.status_code == 200, (path, response.text)
        body = _strict_json(response.text)
        assert "Infinity" not in response.text and "NaN" not in response.text, path
        if "price" in body:
            assert math.isfinite(body["price"]["next_request"])
    usage = chat.client.get("/api/v1/usage", headers=chat.headers).json()
    assert isinstance(usage["total"], float) and math.isfinite(usage["total"])
