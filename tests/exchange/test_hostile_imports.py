"""Hostile import files against a real ``chatmem serve`` (issue 13, finding 1 and SEC-1's
corpus), on SQLite and PostgreSQL: each is refused with 4xx ``invalid_input`` — fast, with
nothing written and the server's memory bounded — or, for text PostgreSQL cannot hold,
normalised the same way on both backends.

The server's memory is read from ``/proc`` (its peak resident size, VmHWM, never goes down):
finding 1's 400 KB file took it to 21 GB before ``chatmem.bounds`` scanned bytes ahead of
ijson.
"""

from __future__ import annotations

import io
import json
import time
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from tests.support.app import BACKENDS
from tests.support.serve import ServeProcess
from tests.support.served import memory, served

MB = 1024 * 1024
# Smaller limits than the defaults so the corpus stays small and quick; finding 1 needs none.
LIMITS = {
    "CHATMEM_MAX_IMPORT_BYTES": str(64 * MB),
    "CHATMEM_MAX_STRING_BYTES": str(1 * MB),
    "CHATMEM_MAX_IMPORT_CONVERSATION_BYTES": str(4 * MB),
}
GROWTH_LIMIT = 50 * MB

FINDING_1 = (
    b'{"format":"chatmem.export/1","conversations":[{"id":"d1","title":"x","messages":[],'
    b'"files":[],"extra":' + b"[" * 200_000 + b"]" * 200_000 + b"}]}"
)


def native(*conversations: dict[str, Any], **top: Any) -> bytes:
    return json.dumps(
        {"format": "chatmem.export/1", "conversations": list(conversations), **top}
    ).encode()


def conversation(cid: str = "c1", **fields: Any) -> dict[str, Any]:
    return {
        "id": cid,
        "title": "t",
        "messages": [{"id": "m1", "role": "user", "content": "hello"}],
        "files": [],
        **fields,
    }


def chatgpt(mapping: dict[str, Any], current: str) -> bytes:
    return json.dumps(
        [{"title": "g", "conversation_id": "g1", "current_node": current, "mapping": mapping}]
    ).encode()


def node(nid: str, parent: str | None, text: str = "hi") -> dict[str, Any]:
    return {
        "id": nid,
        "parent": parent,
        "children": [],
        "message": {
            "id": nid,
            "author": {"role": "user"},
            "content": {"content_type": "text", "parts": [text]},
        },
    }


def zipped(name: str, data: bytes, *, level: int = 9) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED, compresslevel=level) as archive:
        archive.writestr(name, data)
    return out.getvalue()


def lying_zip(data: bytes, declared: int) -> bytes:
    """A ZIP whose headers understate the member's size (a bomb that hides)."""
    raw = bytearray(zipped("conversations.json", data))
    real = len(data).to_bytes(4, "little")
    for signature, offset in ((b"PK\x03\x04", 22), (b"PK\x01\x02", 24)):
        at = raw.find(signature)
        assert raw[at + offset : at + offset + 4] == real
        raw[at + offset : at + offset + 4] = declared.to_bytes(4, "little")
    return bytes(raw)


def many_then_one_bad(count: int = 10_000) -> bytes:
    items = [conversation(f"c{i}") for i in range(count - 1)]
    items.append(conversation(f"c{count}", pinned="yes"))
    return native(*items)


def bracket_bomb() -> bytes:
    return zipped("conversations.json", b"[" * (40 * MB))


def space_bomb() -> bytes:
    return zipped("conversations.json", b" " * (80 * MB) + b"[]")


REFUSED: dict[str, Callable[[], bytes]] = {
    "finding 1: deep nesting under an unknown key": lambda: FINDING_1,
    "deep nesting before the format key": lambda: b'{"a":' + b"[" * 100_000 + b"]" * 100_000,
    "deep objects in a ChatGPT export": lambda: b'[{"mapping":' + b'{"a":' * 100_000,
    "deep nesting in a Claude export": lambda: (
        b'[{"chat_messages":[{"content":' + b"[" * 1000 + b"]" * 1000 + b"}]}]"
    ),
    "unknown key in a conversation": lambda: native(conversation(extra=[])),
    "unknown key in a message": lambda: native(
        conversation(messages=[{"id": "m", "role": "user", "content": "x", "secret": 1}])
    ),
    "unknown top-level key": lambda: native(conversation(), hello="world"),
    "a float beyond range": lambda: native(conversation()).replace(
        b'"title": "t"', b'"title": "t", "pinned": 1e999'
    ),
    "an integer beyond 64 bits": lambda: native(
        conversation(summaries=[{"text": "s", "through": "m1"}])
    ).replace(b'"through": "m1"', b'"through": "m1", "version": 99999999999999999999999'),
    "a summary version beyond the database": lambda: native(
        conversation(summaries=[{"text": "s", "through": "m1", "version": 2**40}])
    ),
    "a summary cost beyond range": lambda: native(
        conversation(summaries=[{"text": "s", "through": "m1", "cost": 1e300}])
    ),
    "a huge timestamp": lambda: native(conversation(created_at=1e300)),
    "a lone low surrogate": lambda: native(conversation()).replace(b'"t"', b'"\\udc00"'),
    "invalid UTF-8": lambda: native(conversation()).replace(b'"t"', b'"\xed\xa0\x80"'),
    "a string past CHATMEM_MAX_STRING_BYTES": lambda: native(
        conversation(messages=[{"id": "m", "role": "user", "content": "x" * (2 * MB)}])
    ),
    "a conversation past CHATMEM_MAX_IMPORT_CONVERSATION_BYTES": lambda: native(
        conversation(
            messages=[{"id": f"m{i}", "role": "user", "content": "y" * 100_000} for i in range(60)]
        )
    ),
    "a cycle in the ChatGPT mapping": lambda: chatgpt(
        {"a": node("a", "b"), "b": node("b", "c"), "c": node("c", "a")}, "a"
    ),
    "a cycle in the Open WebUI history": lambda: json.dumps(
        [
            {
                "id": "w",
                "title": "w",
                "chat": {
                    "history": {
                        "currentId": "x",
                        "messages": {
                            "x": {"parentId": "y", "role": "user", "content": "a"},
                            "y": {"parentId": "x", "role": "user", "content": "b"},
                        },
                    }
                },
            }
        ]
    ).encode(),
    "10,000 conversations, one bad field at the end": many_then_one_bad,
    "zip bomb: declared larger than an upload": space_bomb,
    "zip bomb: 40 MB of brackets": bracket_bomb,
    "zip bomb: headers that lie about the size": lambda: lying_zip(b" " * (8 * MB) + b"[]", 1000),
    "zip slip: a member outside the archive": lambda: zipped(
        "../../../../tmp/chatmem-zip-slip/conversations.json", chatgpt({"a": node("a", None)}, "a")
    ),
    "zip slip: an absolute member": lambda: zipped(
        "/tmp/chatmem-zip-slip/conversations.json", chatgpt({"a": node("a", None)}, "a")
    ),
    "a zip inside the zip": lambda: zipped(
        "conversations.json", zipped("conversations.json", b"[]")
    ),
}


@pytest.fixture(scope="module", params=BACKENDS)
def world(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[ServeProcess, httpx.Client]]:
    state = tmp_path_factory.mktemp(f"hostile-{request.param}")
    with served(state, str(request.param), **LIMITS) as server:
        api = server.signed_in("mallory")
        # Warm up every path an import takes, so the baseline holds what any import needs.
        warm = api.post("/api/v1/import", content=native(conversation("warm")))
        assert warm.status_code == 200, warm.text
        api.delete(f"/api/v1/conversations/{warm.json()['conversation_ids'][0]}")
        try:
            yield server, api
        finally:
            api.close()


def _nothing_written(api: httpx.Client) -> None:
    assert api.get("/api/v1/conversations").json()["items"] == []
    assert api.get("/api/v1/folders").json()["items"] == []


def _peak(server: ServeProcess) -> int:
    assert server.proc is not None
    return memory(server.proc.pid)["hwm"]


def test_finding1_the_400kb_import_is_refused_fast_and_the_server_stays_small(
    world: tuple[ServeProcess, httpx.Client],
) -> None:
    server, api = world
    assert len(FINDING_1) > 400_000  # the 400 KB of brackets from the review
    before = _peak(server)
    for _ in range(3):
        started = time.perf_counter()
        response = api.post("/api/v1/import", content=FINDING_1)
        elapsed = time.perf_counter() - started
        assert response.status_code == 422, response.text[:300]
        error = response.json()["error"]
        assert error["code"] == "invalid_input" and "deeper than 64" in error["message"]
        assert elapsed < 2, elapsed
    # As a multipart upload, as the browser sends it, too.
    response = api.post(
        "/api/v1/import", files={"file": ("export.json", FINDING_1, "application/json")}
    )
    assert response.status_code == 422, response.text[:300]
    assert _peak(server) - before < GROWTH_LIMIT
    _nothing_written(api)
    assert api.get("/healthz").status_code == 200


@pytest.mark.parametrize("case", list(REFUSED))
def test_hostile_import_files_are_refused_with_nothing_written_and_memory_bounded(
    world: tuple[ServeProcess, httpx.Client], case: str
) -> None:
    server, api = world
    data = REFUSED[case]()
    before = _peak(server)
    started = time.perf_counter()
    response = api.post("/api/v1/import", content=data, timeout=120)
    elapsed = time.perf_counter() - started
    assert 400 <= response.status_code < 500, (case, response.status_code, response.text[:500])
    error = response.json()["error"]
    assert error["code"] in ("invalid_input", "payload_too_large"), error
    assert error["message"], error
    _nothing_written(api)
    assert _peak(server) - before < GROWTH_LIMIT, case
    assert elapsed < 60, (case, elapsed)
    assert not Path("/tmp/chatmem-zip-slip").exists()


def test_unknown_keys_are_named(world: tuple[ServeProcess, httpx.Client]) -> None:
    _, api = world
    for data, name in [
        (native(conversation(extra=1)), "extra"),
        (native(conversation(summary={"text": "s", "through": "m1", "by": "x"})), "by"),
        (native(conversation(summaries=[{"text": "s", "through": "m1", "why": 1}])), "why"),
        (native(conversation(profile={"base_url": "http://x"})), "base_url"),
        (native(conversation(files=[{"id": "f", "name": "a", "path": "/etc"}])), "path"),
        (native(conversation(), version=2), "version"),
    ]:
        response = api.post("/api/v1/import", content=data)
        assert response.status_code == 422, response.text
        assert name in response.json()["error"]["message"], response.text
    _nothing_written(api)


NORMALISED = {
    "NUL": (b"a\\u0000b", "a\ufffdb"),
    "NUL alone": (b"\\u0000", "\ufffd"),
    "a lone high surrogate": (b"a\\ud800b", "a?b"),  # how ijson reads it, on every backend
}


@pytest.mark.parametrize("case", list(NORMALISED))
def test_text_postgresql_cannot_hold_is_normalised_the_same_on_every_backend(
    world: tuple[ServeProcess, httpx.Client], case: str
) -> None:
    server, _ = world
    raw, stored = NORMALISED[case]
    api = server.signed_in(f"u{abs(hash(case)) % 10**8}-{time.monotonic_ns()}")
    item = conversation(
        "n1",
        folder="F",
        instructions="I",
        summaries=[{"text": "S", "through": "m1", "focus": "X", "model": "M"}],
        files=[{"id": "f1", "name": "N", "content": "C", "message_id": "m1"}],
        messages=[
            {"id": "m1", "role": "user", "content": "Q"},
            {
                "id": "m2",
                "role": "assistant",
                "content": "A",
                "tool_calls": [{"id": "T", "name": "W", "arguments": "R"}],
            },
            {"id": "m3", "role": "tool", "content": "O", "tool_call_id": "T"},
        ],
    )
    data = native(item)
    for letter in (b"t", b"F", b"I", b"S", b"X", b"M", b"N", b"C", b"Q", b"A", b"T", b"W", b"R"):
        data = data.replace(b'"' + letter + b'"', b'"' + letter + raw + b'"')
    response = api.post("/api/v1/import", content=data)
    assert response.status_code == 200, response.text
    (cid,) = response.json()["conversation_ids"]
    got = api.get(f"/api/v1/conversations/{cid}").json()
    assert got["title"] == "t" + stored
    assert got["instructions"] == "I" + stored
    assert [f["name"] for f in api.get("/api/v1/folders").json()["items"]] == ["F" + stored]
    history = api.get(f"/api/v1/conversations/{cid}/messages").json()
    assert [m["content"] for m in history["items"]] == ["Q" + stored, "A" + stored, "O"]
    assert history["items"][1]["tool_calls"][0]["name"] == "W" + stored
    exported = api.get("/api/v1/export").text
    assert "\\u0000" not in exported and "\x00" not in exported
    api.close()
