"""STORE-5 over HTTP: ``GET /api/v1/export`` and ``POST /api/v1/import``."""

from __future__ import annotations

import json
from pathlib import Path

from fastapi.testclient import TestClient
from tests.support.app import ApiUser, make_user

from chatmem.settings import Settings
from chatmem.web.app import create_app

SAMPLES = Path(__file__).parent / "samples"


def seed(client: TestClient, user: ApiUser) -> str:
    h = user.headers
    folder = client.post("/api/v1/folders", json={"name": "Work"}, headers=h).json()["id"]
    cid = client.post(
        "/api/v1/conversations",
        json={"title": "Quarterly report", "folder_id": folder, "pinned": True},
        headers=h,
    ).json()["id"]
    for role, content in (("user", "Draft the summary"), ("assistant", "Here it is.")):
        response = client.post(
            f"/api/v1/conversations/{cid}/messages",
            json={"role": role, "content": content},
            headers=h,
        )
        assert response.status_code in (200, 201), response.text
    return cid


def listed_titles(client: TestClient, user: ApiUser) -> list[str]:
    body = client.get("/api/v1/conversations", headers=user.headers).json()
    return sorted(c["title"] for c in body["items"])


def test_export_downloads_the_contract_document(client: TestClient, user: ApiUser) -> None:
    cid = seed(client, user)
    response = client.get("/api/v1/export", headers=user.headers)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/json")
    assert "attachment" in response.headers["content-disposition"]
    document = response.json()
    assert document["format"] == "chatmem.export/1"
    (conversation,) = document["conversations"]
    assert conversation["id"] == cid
    assert (conversation["title"], conversation["folder"], conversation["pinned"]) == (
        "Quarterly report",
        "Work",
        True,
    )
    assert [m["content"] for m in conversation["messages"]] == ["Draft the summary", "Here it is."]
    assert conversation["summary"] is None


def test_export_of_one_conversation_and_of_a_foreign_one(
    client: TestClient, user: ApiUser, other_user: ApiUser
) -> None:
    """STORE-1: a foreign conversation id answers 404 like a missing one."""
    cid = seed(client, user)
    seed(client, user)
    one = client.get("/api/v1/export", params={"conversation_id": cid}, headers=user.headers).json()
    assert [c["id"] for c in one["conversations"]] == [cid]
    foreign = client.get(
        "/api/v1/export", params={"conversation_id": cid}, headers=other_user.headers
    )
    missing = client.get(
        "/api/v1/export", params={"conversation_id": "0" * 32}, headers=other_user.headers
    )
    assert foreign.status_code == missing.status_code == 404
    assert foreign.json() == missing.json()
    assert foreign.json()["error"]["code"] == "not_found"


def test_export_then_import_elsewhere_keeps_everything(
    client: TestClient, user: ApiUser, other_user: ApiUser
) -> None:
    seed(client, user)
    data = client.get("/api/v1/export", headers=user.headers).content
    response = client.post(
        "/api/v1/import",
        content=data,
        headers={**other_user.headers, "Content-Type": "application/json"},
    )
    assert response.status_code == 200, response.text
    assert response.json()["imported"] == 1
    back = client.get("/api/v1/export", headers=other_user.headers).json()["conversations"]
    original = json.loads(data)["conversations"]
    strip = ("id", "created_at", "updated_at")
    assert [{k: v for k, v in c.items() if k not in strip and k != "messages"} for c in back] == [
        {k: v for k, v in c.items() if k not in strip and k != "messages"} for c in original
    ]
    assert [[(m["role"], m["content"]) for m in c["messages"]] for c in back] == [
        [(m["role"], m["content"]) for m in c["messages"]] for c in original
    ]


def test_import_as_raw_body_or_multipart_and_never_twice(client: TestClient, user: ApiUser) -> None:
    """STORE-5: importing the same file twice creates no duplicates."""
    chatgpt = (SAMPLES / "chatgpt_conversations.json").read_bytes()
    first = client.post("/api/v1/import", content=chatgpt, headers=user.headers)
    assert first.status_code == 200, first.text
    assert (first.json()["format"], first.json()["imported"]) == ("chatgpt", 2)
    again = client.post(
        "/api/v1/import",
        files={"file": ("conversations.json", chatgpt, "application/json")},
        headers=user.headers,
    )
    assert again.status_code == 200, again.text
    assert (again.json()["imported"], again.json()["skipped"]) == (0, 2)
    claude = client.post(
        "/api/v1/import",
        files={
            "file": ("conversations.json", (SAMPLES / "claude_conversations.json").read_bytes())
        },
        headers=user.headers,
    )
    assert claude.json()["imported"] == 1
    assert listed_titles(client, user) == [
        "Sourdough starter",
        "Trip to Lisbon",
        "Untitled branchless",
    ]


def test_malformed_or_foreign_imports_are_422_and_change_nothing(
    client: TestClient, user: ApiUser
) -> None:
    seed(client, user)
    before = client.get("/api/v1/export", headers=user.headers).json()["conversations"]
    bad_native = (
        (SAMPLES / "chatmem_export.json").read_text().replace('"role": "tool"', '"role": "robot"')
    )
    for body in (
        b"",
        b"\x89PNG\r\n\x1a\n binary",
        b'{"some": "other app"}',
        b"[1, 2]",
        (SAMPLES / "openwebui_export.json").read_bytes()[:-40],  # cut off
        bad_native.encode(),
    ):
        response = client.post("/api/v1/import", content=body, headers=user.headers)
        assert response.status_code == 422, (body[:40], response.text)
        error = response.json()["error"]
        assert error["code"] == "invalid_input"
        assert error["message"]
    multipart_without_file = client.post("/api/v1/import", data={"note": "x"}, headers=user.headers)
    assert multipart_without_file.status_code == 422
    assert client.get("/api/v1/export", headers=user.headers).json()["conversations"] == before


def test_import_needs_authentication(client: TestClient) -> None:
    response = client.post("/api/v1/import", content=b"[]")
    assert response.status_code == 401


def test_an_import_larger_than_the_limit_is_413_and_changes_nothing(settings: Settings) -> None:
    small = settings.model_copy(update={"max_import_bytes": 600})
    with TestClient(create_app(small)) as client:
        user = make_user(client, "alice")
        data = (SAMPLES / "chatgpt_conversations.json").read_bytes()
        assert len(data) > 600
        response = client.post("/api/v1/import", content=data, headers=user.headers)
        assert response.status_code == 413
        assert response.json()["error"]["code"] == "payload_too_large"
        assert client.get("/api/v1/conversations", headers=user.headers).json()["items"] == []
