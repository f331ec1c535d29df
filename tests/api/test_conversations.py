"""Folders and conversations over HTTP, on SQLite and PostgreSQL (STORE-2, STORE-4, STORE-7)."""

from __future__ import annotations

from fastapi.testclient import TestClient
from tests.support.app import ApiUser, make_user


def _create(client: TestClient, user: ApiUser, **body: object) -> dict:
    response = client.post("/api/v1/conversations", json=body, headers=user.headers)
    assert response.status_code == 201, response.text
    return response.json()


def test_create_read_update_delete_conversation(client: TestClient, user: ApiUser) -> None:
    created = _create(client, user, title="Trip", mode="economy")
    assert created["title"] == "Trip"
    assert created["mode"] == "economy"
    assert created["pinned"] is False
    assert created["created_at"].endswith("Z")
    cid = created["id"]

    got = client.get(f"/api/v1/conversations/{cid}", headers=user.headers).json()
    assert got["message_count"] == 0

    changed = client.patch(
        f"/api/v1/conversations/{cid}",
        json={"title": "Trip 2", "pinned": True},
        headers=user.headers,
    ).json()
    assert (changed["title"], changed["pinned"], changed["mode"]) == ("Trip 2", True, "economy")

    assert client.delete(f"/api/v1/conversations/{cid}", headers=user.headers).status_code == 204
    missing = client.get(f"/api/v1/conversations/{cid}", headers=user.headers)
    assert missing.status_code == 404
    assert missing.json()["error"]["code"] == "not_found"


def test_unknown_mode_is_invalid_input(client: TestClient, user: ApiUser) -> None:
    cid = _create(client, user)["id"]
    response = client.patch(
        f"/api/v1/conversations/{cid}", json={"mode": "forever"}, headers=user.headers
    )
    assert response.status_code == 422
    assert response.json()["error"]["code"] == "invalid_input"
    response = client.post("/api/v1/conversations", json={"mode": "nope"}, headers=user.headers)
    assert response.json()["error"]["code"] == "invalid_input"


def test_list_is_pinned_first_then_most_recent_and_paged(client: TestClient, user: ApiUser) -> None:
    ids = [_create(client, user, title=f"c{i}")["id"] for i in range(7)]
    client.patch(f"/api/v1/conversations/{ids[2]}", json={"pinned": True}, headers=user.headers)
    seen: list[str] = []
    cursor = None
    while True:
        params: dict[str, object] = {"limit": 3}
        if cursor:
            params["cursor"] = cursor
        page = client.get("/api/v1/conversations", params=params, headers=user.headers).json()
        seen += [c["id"] for c in page["items"]]
        cursor = page["next_cursor"]
        if not cursor:
            break
    assert seen == [ids[2], *reversed([i for i in ids if i != ids[2]])]


def test_offset_paging_matches_cursor_paging(client: TestClient, user: ApiUser) -> None:
    ids = [_create(client, user, title=f"c{i}")["id"] for i in range(5)]
    page = client.get(
        "/api/v1/conversations", params={"limit": 2, "offset": 2}, headers=user.headers
    )
    assert [c["id"] for c in page.json()["items"]] == [ids[2], ids[1]]


def test_store7_search_matches_title_and_message_content(client: TestClient, user: ApiUser) -> None:
    by_title = _create(client, user, title="Holiday planning")["id"]
    by_content = _create(client, user, title="Misc")["id"]
    _create(client, user, title="Other")
    client.post(
        f"/api/v1/conversations/{by_content}/messages",
        json={"role": "user", "content": "Which volcano erupted in Iceland?"},
        headers=user.headers,
    )

    def found(q: str) -> set[str]:
        response = client.get("/api/v1/conversations", params={"q": q}, headers=user.headers)
        assert response.status_code == 200, response.text
        return {c["id"] for c in response.json()["items"]}

    assert found("holiday") == {by_title}
    assert found("volcano") == {by_content}
    assert found("volc") == {by_content}  # the last word is a prefix (search as you type)
    assert found("iceland volcano") == {by_content}
    assert found("nothing-like-this") == set()
    assert found('"unbalanced AND (') == set()  # FTS syntax in input is inert


def test_folders_filter_and_deletion_keeps_conversations(client: TestClient, user: ApiUser) -> None:
    folder = client.post("/api/v1/folders", json={"name": "Work"}, headers=user.headers).json()
    inside = _create(client, user, title="in", folder_id=folder["id"])["id"]
    _create(client, user, title="out")
    listed = client.get(
        "/api/v1/conversations", params={"folder_id": folder["id"]}, headers=user.headers
    )
    assert [c["id"] for c in listed.json()["items"]] == [inside]
    renamed = client.patch(
        f"/api/v1/folders/{folder['id']}", json={"name": "Job"}, headers=user.headers
    )
    assert renamed.json()["name"] == "Job"
    assert client.get("/api/v1/folders", headers=user.headers).json()["items"][0]["name"] == "Job"
    assert client.delete(f"/api/v1/folders/{folder['id']}", headers=user.headers).status_code == 204
    still = client.get(f"/api/v1/conversations/{inside}", headers=user.headers).json()
    assert still["folder_id"] is None


def test_foreign_folder_id_in_a_conversation_is_not_found(
    client: TestClient, user: ApiUser
) -> None:
    other = make_user(client, "bob")
    folder = client.post("/api/v1/folders", json={"name": "Bob's"}, headers=other.headers).json()
    response = client.post(
        "/api/v1/conversations", json={"folder_id": folder["id"]}, headers=user.headers
    )
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"


def test_unknown_profile_id_is_not_found(client: TestClient, user: ApiUser) -> None:
    cid = _create(client, user)["id"]
    response = client.patch(
        f"/api/v1/conversations/{cid}", json={"profile_id": "nope"}, headers=user.headers
    )
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"
