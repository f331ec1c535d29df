"""PROV-4 with ARCH-1 and STORE-5: a tool's binary attachment survives archive and restore,
and export and import, byte for byte."""

from __future__ import annotations

from fastapi.testclient import TestClient
from tests.support.app import ApiUser

from chatmem.store.files import add_attachments
from chatmem.tools.results import ToolAttachment

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 3


def _conversation_with_image(client: TestClient, user: ApiUser) -> tuple[str, str]:
    h = user.headers
    cid = client.post("/api/v1/conversations", json={"title": "Pictures"}, headers=h).json()["id"]
    posted = client.post(
        f"/api/v1/conversations/{cid}/messages",
        json={"role": "user", "content": "a picture, please"},
        headers=h,
    ).json()
    with client.app.state.db.session() as session:  # type: ignore[attr-defined]
        [file] = add_attachments(
            session, cid, posted["id"], [ToolAttachment("shot.png", "image/png", PNG)]
        )
        session.commit()
    return cid, file["id"]


def _files(client: TestClient, user: ApiUser, cid: str) -> list[dict[str, object]]:
    body = client.get(f"/api/v1/conversations/{cid}/messages", headers=user.headers).json()
    return list(body["files"])


def test_archive_and_restore_keep_a_binary_attachment(client: TestClient, user: ApiUser) -> None:
    h = user.headers
    cid, fid = _conversation_with_image(client, user)
    assert client.get(f"/api/v1/files/{fid}/content", headers=h).content == PNG
    assert client.post(f"/api/v1/conversations/{cid}/archive", headers=h).status_code == 200
    assert client.get(f"/api/v1/files/{fid}/content", headers=h).status_code == 404
    assert client.post(f"/api/v1/archive/{cid}/restore", headers=h).status_code == 200
    [file] = _files(client, user, cid)
    assert file["mime"] == "image/png" and file["size"] == len(PNG)
    restored = client.get(str(file["content_url"]), headers=h)
    assert restored.status_code == 200 and restored.content == PNG


def test_export_and_import_keep_a_binary_attachment(
    client: TestClient, user: ApiUser, other_user: ApiUser
) -> None:
    _conversation_with_image(client, user)
    data = client.get("/api/v1/export", headers=user.headers).content
    assert b'"data_base64"' in data and b"image/png" in data
    response = client.post("/api/v1/import", content=data, headers=other_user.headers)
    assert response.status_code == 200, response.text
    [new_id] = response.json()["conversation_ids"]
    [file] = _files(client, other_user, new_id)
    assert file["mime"] == "image/png" and file["name"] == "shot.png"
    assert client.get(str(file["content_url"]), headers=other_user.headers).content == PNG
    # the owner of the original cannot read the copy, nor the other way round (STORE-1)
    assert client.get(str(file["content_url"]), headers=user.headers).status_code == 404
