"""ARCH-1 over HTTP: archive, list/search, read, restore, delete — and 404 for strangers."""

from __future__ import annotations

from fastapi.testclient import TestClient
from tests.support.app import ApiUser


def seed(client: TestClient, user: ApiUser, title: str) -> str:
    h = user.headers
    cid = client.post("/api/v1/conversations", json={"title": title}, headers=h).json()["id"]
    for role, content in (("user", f"about {title}"), ("assistant", "noted")):
        client.post(
            f"/api/v1/conversations/{cid}/messages",
            json={"role": role, "content": content},
            headers=h,
        )
    return cid


def test_archive_lifecycle(client: TestClient, user: ApiUser) -> None:
    """ARCH-1: leaves list and search, searchable by title, readable, restorable, deletable."""
    h = user.headers
    cid = seed(client, user, "Holiday in Rome")
    other = seed(client, user, "Groceries")
    before = client.get(f"/api/v1/conversations/{cid}/messages", headers=h).json()

    archived = client.post(f"/api/v1/conversations/{cid}/archive", headers=h)
    assert archived.status_code == 200, archived.text
    assert archived.json()["id"] == cid and archived.json()["message_count"] == 2

    listed = client.get("/api/v1/conversations", headers=h).json()["items"]
    assert [c["id"] for c in listed] == [other]
    assert (
        client.get("/api/v1/conversations", params={"q": "Rome"}, headers=h).json()["items"] == []
    )
    assert client.get(f"/api/v1/conversations/{cid}", headers=h).status_code == 404

    found = client.get("/api/v1/archive", params={"q": "rome"}, headers=h).json()
    assert [i["id"] for i in found["items"]] == [cid] and found["total"] == 1
    assert client.get("/api/v1/archive", params={"q": "groceries"}, headers=h).json()["items"] == []

    read = client.get(f"/api/v1/archive/{cid}", headers=h)
    assert read.status_code == 200
    assert [m["content"] for m in read.json()["messages"]] == ["about Holiday in Rome", "noted"]
    assert client.get(f"/api/v1/archive/{cid}", headers=h).json() == read.json()

    restored = client.post(f"/api/v1/archive/{cid}/restore", headers=h)
    assert restored.status_code == 200, restored.text
    assert restored.json()["id"] == cid and restored.json()["archived"] is False
    assert client.get(f"/api/v1/conversations/{cid}/messages", headers=h).json() == before
    assert client.get("/api/v1/archive", headers=h).json()["items"] == []
    assert client.get(f"/api/v1/archive/{cid}", headers=h).status_code == 404

    client.post(f"/api/v1/conversations/{cid}/archive", headers=h)
    assert client.delete(f"/api/v1/archive/{cid}", headers=h).status_code == 204
    assert client.get(f"/api/v1/archive/{cid}", headers=h).status_code == 404
    assert client.post(f"/api/v1/archive/{cid}/restore", headers=h).status_code == 404
    assert [c["id"] for c in client.get("/api/v1/conversations", headers=h).json()["items"]] == [
        other
    ]


def test_strangers_get_404_and_change_nothing(
    client: TestClient, user: ApiUser, other_user: ApiUser
) -> None:
    """STORE-1 on every archive route."""
    cid = seed(client, user, "Private")
    s = other_user.headers
    assert client.post(f"/api/v1/conversations/{cid}/archive", headers=s).status_code == 404
    client.post(f"/api/v1/conversations/{cid}/archive", headers=user.headers)
    for method, path in (
        ("GET", f"/api/v1/archive/{cid}"),
        ("POST", f"/api/v1/archive/{cid}/restore"),
        ("DELETE", f"/api/v1/archive/{cid}"),
    ):
        response = client.request(method, path, headers=s)
        assert response.status_code == 404 and response.json()["error"]["code"] == "not_found"
    assert client.get("/api/v1/archive", headers=s).json()["items"] == []
    assert client.get(f"/api/v1/archive/{cid}", headers=user.headers).status_code == 200


def test_archive_list_pages(client: TestClient, user: ApiUser) -> None:
    for index in range(3):
        cid = seed(client, user, f"Note {index}")
        client.post(f"/api/v1/conversations/{cid}/archive", headers=user.headers)
    page = client.get("/api/v1/archive", params={"limit": 2}, headers=user.headers).json()
    assert len(page["items"]) == 2 and page["total"] == 3 and page["next_offset"] == 2
    rest = client.get(
        "/api/v1/archive", params={"limit": 2, "offset": 2}, headers=user.headers
    ).json()
    assert len(rest["items"]) == 1 and rest["next_offset"] is None
    bad = client.get("/api/v1/archive", params={"limit": 0}, headers=user.headers)
    assert bad.status_code == 422 and bad.json()["error"]["code"] == "invalid_input"


def test_export_all_includes_the_archive_and_import_restores_its_state(
    client: TestClient, user: ApiUser, other_user: ApiUser
) -> None:
    """STORE-5: nothing is lost moving an account, archived conversations included."""
    kept = seed(client, user, "Kept live")
    old = seed(client, user, "Archived trip")
    client.post(f"/api/v1/conversations/{old}/archive", headers=user.headers)
    data = client.get("/api/v1/export", headers=user.headers).content
    response = client.post("/api/v1/import", content=data, headers=other_user.headers)
    assert response.status_code == 200, response.text
    assert (response.json()["imported"], response.json()["archived"]) == (2, 1)
    listed = client.get("/api/v1/conversations", headers=other_user.headers).json()["items"]
    assert [c["title"] for c in listed] == ["Kept live"]
    archived = client.get("/api/v1/archive", headers=other_user.headers).json()["items"]
    assert [a["title"] for a in archived] == ["Archived trip"]
    read = client.get(f"/api/v1/archive/{archived[0]['id']}", headers=other_user.headers).json()
    assert [m["content"] for m in read["messages"]] == ["about Archived trip", "noted"]
    assert kept not in {c["id"] for c in listed}  # another user: fresh ids
