"""PROJ-1: projects with shared instructions and files.  The project's instructions reach the
model in every conversation of the project (the fake model server records each request);
its files are counted in the Files row and pinned or excluded per conversation; a
conversation moved in gets them; export/import and the archive carry the project; another
user's project is 404 (STORE-1); the quota applies."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from tests.support.app import make_user
from tests.support.model_server import FakeModelServer
from tests.turns.conftest import Chat, make_chat

from chatmem.settings import Settings
from chatmem.web.app import create_app

RULES = "Answer in French. Cite the style guide."
GUIDE = "Style guide: short sentences, no jargon."


@pytest.fixture
def api(settings: Settings) -> Iterator[TestClient]:
    turns = settings.model_copy(update={"allow_private_endpoints": True})
    with TestClient(create_app(turns)) as client:
        yield client


def new_project(chat: Chat, name: str = "Docs", instructions: str = RULES) -> dict[str, Any]:
    response = chat.client.post(
        "/api/v1/projects", json={"name": name, "instructions": instructions}, headers=chat.headers
    )
    assert response.status_code == 201, response.text
    return dict(response.json())


def add_file(chat: Chat, project_id: str, name: str, content: str) -> dict[str, Any]:
    response = chat.client.post(
        f"/api/v1/projects/{project_id}/files",
        files={"file": (name, content.encode(), "text/plain")},
        headers=chat.headers,
    )
    assert response.status_code == 201, response.text
    return dict(response.json())


def new_conversation(chat: Chat, **fields: Any) -> str:
    response = chat.client.post(
        "/api/v1/conversations",
        json={"title": "in project", "profile_id": chat.profile_id, **fields},
        headers=chat.headers,
    )
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


def ask(chat: Chat, conversation_id: str, content: str) -> list[dict[str, Any]]:
    """One turn; the messages the model was sent."""
    chat.model.reply("D'accord.")
    response = chat.client.post(
        f"/api/v1/conversations/{conversation_id}/turns",
        json={"content": content},
        headers=chat.headers,
    )
    assert response.status_code == 202, response.text
    assert chat.wait(response.json()["run_id"])["status"] == "completed"
    return list(chat.model.chat_requests[-1].messages)


def plan(chat: Chat, conversation_id: str) -> dict[str, Any]:
    response = chat.client.get(
        f"/api/v1/conversations/{conversation_id}/context", headers=chat.headers
    )
    assert response.status_code == 200, response.text
    return dict(response.json())


def test_a_projects_instructions_and_files_reach_the_model_in_every_conversation(
    api: TestClient, model_server: FakeModelServer
) -> None:
    chat = make_chat(api, model_server)
    project = new_project(chat)
    guide = add_file(chat, project["id"], "guide.md", GUIDE)
    first = new_conversation(chat, project_id=project["id"], instructions="Be brief.")
    second = new_conversation(chat, project_id=project["id"])
    for cid in (first, second):
        sent = ask(chat, cid, "Hello")
        assert sent[0] == {"role": "system", "content": RULES}
        assert {"role": "system", "content": f"File guide.md:\n\n{GUIDE}"} in sent
        assert sent[-1] == {"role": "user", "content": "Hello"}
    # The conversation's own instructions follow the project's.
    first_sent = chat.model.chat_requests[-2].messages
    assert first_sent[1] == {"role": "system", "content": "Be brief."}

    counted = plan(chat, second)
    assert counted["tokens"]["instructions"] > 0 and counted["tokens"]["files"] > 0
    assert counted["files"][guide["id"]] == "in_memory"
    listed = api.get(f"/api/v1/projects/{project['id']}/conversations", headers=chat.headers)
    assert {c["id"] for c in listed.json()["items"]} == {first, second}
    assert (
        api.get("/api/v1/projects", headers=chat.headers).json()["items"][0]["conversation_count"]
        == 2
    )

    # A change to the instructions reaches the next request (and the plan) at once.
    api.patch(
        f"/api/v1/projects/{project['id']}",
        json={"instructions": "Answer in Italian."},
        headers=chat.headers,
    )
    assert plan(chat, second)["messages"][0]["content"] == "Answer in Italian."
    assert ask(chat, second, "Again")[0]["content"] == "Answer in Italian."


def test_project_files_are_pinned_or_excluded_per_conversation(
    api: TestClient, model_server: FakeModelServer
) -> None:
    chat = make_chat(api, model_server)
    project = new_project(chat)
    guide = add_file(chat, project["id"], "guide.md", GUIDE)
    one = new_conversation(chat, project_id=project["id"])
    two = new_conversation(chat, project_id=project["id"])
    excluded = api.patch(
        f"/api/v1/conversations/{one}/project-files/{guide['id']}",
        json={"state": "excluded"},
        headers=chat.headers,
    )
    assert excluded.status_code == 200, excluded.text
    assert plan(chat, one)["files"][guide["id"]] == "excluded"
    assert plan(chat, one)["tokens"]["files"] == 0
    assert plan(chat, two)["files"][guide["id"]] == "in_memory"
    assert all("guide.md" not in str(m["content"]) for m in ask(chat, one, "Hi"))
    assert any("guide.md" in str(m["content"]) for m in ask(chat, two, "Hi"))

    # Pinned: sent even in "off", where auto files stay home.
    for cid in (one, two):
        api.patch(f"/api/v1/conversations/{cid}", json={"mode": "off"}, headers=chat.headers)
    api.patch(
        f"/api/v1/conversations/{one}/project-files/{guide['id']}",
        json={"state": "pinned"},
        headers=chat.headers,
    )
    assert plan(chat, one)["files"][guide["id"]] == "pinned"
    assert plan(chat, two)["files"][guide["id"]] == "out_of_memory"
    bad = api.patch(
        f"/api/v1/conversations/{one}/project-files/{guide['id']}",
        json={"state": "sometimes"},
        headers=chat.headers,
    )
    assert bad.status_code in (400, 422)
    # A conversation outside the project has no say over its files.
    outside = new_conversation(chat)
    refused = api.patch(
        f"/api/v1/conversations/{outside}/project-files/{guide['id']}",
        json={"state": "pinned"},
        headers=chat.headers,
    )
    assert refused.status_code == 404


def test_a_conversation_moved_into_a_project_gets_its_instructions(
    api: TestClient, model_server: FakeModelServer
) -> None:
    chat = make_chat(api, model_server)
    assert ask(chat, chat.conversation_id, "Before")[0]["role"] == "user"
    project = new_project(chat)
    moved = api.patch(
        f"/api/v1/conversations/{chat.conversation_id}",
        json={"project_id": project["id"]},
        headers=chat.headers,
    )
    assert moved.status_code == 200 and moved.json()["project_id"] == project["id"]
    assert ask(chat, chat.conversation_id, "After")[0] == {"role": "system", "content": RULES}
    # Out again: nothing of the project is sent.
    api.patch(
        f"/api/v1/conversations/{chat.conversation_id}",
        json={"project_id": None},
        headers=chat.headers,
    )
    assert all(m["content"] != RULES for m in ask(chat, chat.conversation_id, "Out"))
    # Deleting a project keeps its conversations, outside any project.
    cid = new_conversation(chat, project_id=project["id"])
    assert api.delete(f"/api/v1/projects/{project['id']}", headers=chat.headers).status_code == 204
    kept = api.get(f"/api/v1/conversations/{cid}", headers=chat.headers)
    assert kept.status_code == 200 and kept.json()["project_id"] is None


def test_export_import_and_archive_carry_the_project(
    api: TestClient, model_server: FakeModelServer
) -> None:
    chat = make_chat(api, model_server)
    project = new_project(chat)
    guide = add_file(chat, project["id"], "guide.md", GUIDE)
    add_file(chat, project["id"], "terms.txt", "Glossary")
    cid = new_conversation(chat, project_id=project["id"])
    api.patch(
        f"/api/v1/conversations/{cid}/project-files/{guide['id']}",
        json={"state": "pinned"},
        headers=chat.headers,
    )
    ask(chat, cid, "Hello")
    exported = api.get(
        "/api/v1/export", params={"conversation_id": cid}, headers=chat.headers
    ).json()
    [item] = exported["conversations"]
    assert item["project"]["name"] == "Docs" and item["project"]["instructions"] == RULES
    assert [(f["name"], f["state"]) for f in item["project"]["files"]] == [
        ("guide.md", "pinned"),
        ("terms.txt", "auto"),
    ]

    # Another user imports it: the project comes with it, and a second import reuses it.
    bob = make_user(api, "bob")
    imported = api.post("/api/v1/import", json=exported, headers=bob.headers)
    assert imported.status_code == 200, imported.text
    [bobs] = api.get("/api/v1/projects", headers=bob.headers).json()["items"]
    assert (bobs["name"], bobs["instructions"]) == ("Docs", RULES)
    details = api.get(f"/api/v1/projects/{bobs['id']}", headers=bob.headers).json()
    assert [f["name"] for f in details["files"]] == ["guide.md", "terms.txt"]
    [conversation] = api.get("/api/v1/conversations", headers=bob.headers).json()["items"]
    assert conversation["project_id"] == bobs["id"]
    again = api.get("/api/v1/export", headers=bob.headers).json()
    [back] = again["conversations"]
    strip = ("id", "created_at")
    assert [{k: v for k, v in f.items() if k not in strip} for f in back["project"]["files"]] == [
        {k: v for k, v in f.items() if k not in strip} for f in item["project"]["files"]
    ]

    # Archived and restored: still in the project, with its own pin.
    assert api.post(f"/api/v1/conversations/{cid}/archive", headers=chat.headers).status_code == 200
    assert api.get(f"/api/v1/archive/{cid}", headers=chat.headers).status_code == 200
    restored = api.post(f"/api/v1/archive/{cid}/restore", headers=chat.headers)
    assert restored.status_code == 200, restored.text
    assert restored.json()["project_id"] == project["id"]
    assert plan(chat, cid)["files"][guide["id"]] == "pinned"
    assert ask(chat, cid, "Back")[0] == {"role": "system", "content": RULES}


def test_another_users_project_is_not_found(api: TestClient, model_server: FakeModelServer) -> None:
    alice = make_chat(api, model_server, name="alice")
    bob = make_chat(api, model_server, name="bob")
    project = new_project(alice)
    guide = add_file(alice, project["id"], "guide.md", GUIDE)
    pid = project["id"]
    for method, path, body in (
        ("GET", f"/api/v1/projects/{pid}", None),
        ("PATCH", f"/api/v1/projects/{pid}", {"name": "mine"}),
        ("DELETE", f"/api/v1/projects/{pid}", None),
        ("GET", f"/api/v1/projects/{pid}/conversations", None),
        ("GET", f"/api/v1/projects/{pid}/files/{guide['id']}", None),
        ("DELETE", f"/api/v1/projects/{pid}/files/{guide['id']}", None),
        ("POST", "/api/v1/conversations", {"title": "x", "project_id": pid}),
        ("PATCH", f"/api/v1/conversations/{bob.conversation_id}", {"project_id": pid}),
        (
            "PATCH",
            f"/api/v1/conversations/{bob.conversation_id}/project-files/{guide['id']}",
            {"state": "pinned"},
        ),
    ):
        response = api.request(method, path, json=body, headers=bob.headers)
        assert response.status_code == 404, (method, path, response.text)
        assert response.json()["error"]["code"] == "not_found"
    upload = api.post(
        f"/api/v1/projects/{pid}/files",
        files={"file": ("x.txt", b"x", "text/plain")},
        headers=bob.headers,
    )
    assert upload.status_code == 404
    assert api.get("/api/v1/projects", headers=bob.headers).json()["items"] == []
    assert api.get(f"/api/v1/projects/{pid}", headers=alice.headers).json()["name"] == "Docs"


def test_bad_input_and_the_project_quota(settings: Settings) -> None:
    limited = settings.model_copy(update={"max_projects": 2})
    with TestClient(create_app(limited)) as client:
        user = make_user(client, "carol")
        h = user.headers
        for body in ({"name": ""}, {"name": "x" * 201}, {"name": 5}, {"instructions": "x"}):
            response = client.post("/api/v1/projects", json=body, headers=h)
            assert response.status_code in (400, 422), body
            assert response.json()["error"]["code"] == "invalid_input"
        for name in ("one", "two"):
            assert (
                client.post("/api/v1/projects", json={"name": name}, headers=h).status_code == 201
            )
        third = client.post("/api/v1/projects", json={"name": "three"}, headers=h)
        assert third.status_code == 409 and third.json()["error"]["code"] == "quota_exceeded"
        [pid, _] = [p["id"] for p in client.get("/api/v1/projects", headers=h).json()["items"]]
        image = client.post(
            f"/api/v1/projects/{pid}/files",
            files={"file": ("a.png", b"\x89PNG\r\n\x1a\n" + b"\x00" * 64, "image/png")},
            headers=h,
        )
        assert image.status_code in (400, 422)
        binary = client.post(
            f"/api/v1/projects/{pid}/files",
            files={"file": ("a.bin", b"\xff\xfe\x00", "application/octet-stream")},
            headers=h,
        )
        assert binary.status_code in (400, 422)
