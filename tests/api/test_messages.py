"""Messages, exclusions and files over HTTP (STORE-2, STORE-3, CTX-2, CTX-14, CTX-15, CTX-16)."""

from __future__ import annotations

from fastapi.testclient import TestClient
from tests.support.app import ApiUser

from chatmem.context.tokens import count_message, get_tokenizer
from chatmem.context.values import Message


def _conversation(client: TestClient, user: ApiUser, **body: object) -> str:
    return client.post("/api/v1/conversations", json=body, headers=user.headers).json()["id"]


def _say(
    client: TestClient, user: ApiUser, cid: str, role: str, content: str, **extra: object
) -> dict:
    response = client.post(
        f"/api/v1/conversations/{cid}/messages",
        json={"role": role, "content": content, **extra},
        headers=user.headers,
    )
    assert response.status_code == 201, response.text
    return response.json()


def test_store3_messages_keep_role_content_time_and_cached_tokens(
    client: TestClient, user: ApiUser
) -> None:
    cid = _conversation(client, user)
    asked = _say(client, user, cid, "user", "What is 2+2?")
    answered = _say(
        client,
        user,
        cid,
        "assistant",
        "",
        tool_calls=[{"id": "call_1", "name": "calc", "arguments": '{"x": "2+2"}'}],
    )
    _say(client, user, cid, "tool", "4", tool_call_id="call_1")
    _say(client, user, cid, "assistant", "It is 4.")
    history = client.get(f"/api/v1/conversations/{cid}/messages", headers=user.headers).json()
    items = history["items"]
    assert [m["role"] for m in items] == ["user", "assistant", "tool", "assistant"]
    assert [m["seq"] for m in items] == [1, 2, 3, 4]
    assert items[0]["id"] == asked["id"] and items[1]["id"] == answered["id"]
    assert items[0]["created_at"].endswith("Z")
    # APPS-1: no call chatmem made (appended by hand): no record, no app.
    assert items[1]["tool_calls"] == [
        {
            "id": "call_1",
            "name": "calc",
            "arguments": '{"x": "2+2"}',
            "tool_call_id": None,
            "app": None,
        }
    ]
    assert items[2]["tool_call_id"] == "call_1"
    expected = count_message(
        Message(id="x", role="user", content="What is 2+2?"), get_tokenizer("estimate")
    )
    assert items[0]["tokens"] == expected
    assert all(m["status"] == "in_memory" for m in items)


def test_ctx14_off_mode_marks_history_out_of_memory(client: TestClient, user: ApiUser) -> None:
    cid = _conversation(client, user, mode="off")
    _say(client, user, cid, "user", "hello")
    _say(client, user, cid, "assistant", "hi")
    items = client.get(f"/api/v1/conversations/{cid}/messages", headers=user.headers).json()[
        "items"
    ]
    assert {m["status"] for m in items} == {"out_of_memory"}


def test_ctx15_exclude_and_include_a_question_answer_pair(
    client: TestClient, user: ApiUser
) -> None:
    cid = _conversation(client, user)
    q1 = _say(client, user, cid, "user", "first question")["id"]
    a1 = _say(client, user, cid, "assistant", "first answer")["id"]
    q2 = _say(client, user, cid, "user", "second question")["id"]
    a2 = _say(client, user, cid, "assistant", "second answer")["id"]

    response = client.put(
        f"/api/v1/conversations/{cid}/messages/{a1}/exclusion", headers=user.headers
    )
    assert response.status_code == 200
    assert response.json()["message_ids"] == [q1, a1]
    items = client.get(f"/api/v1/conversations/{cid}/messages", headers=user.headers).json()[
        "items"
    ]
    status = {m["id"]: m["status"] for m in items}
    assert status == {q1: "excluded", a1: "excluded", q2: "in_memory", a2: "in_memory"}
    assert [m["excluded"] for m in items] == [True, True, False, False]

    client.delete(f"/api/v1/conversations/{cid}/messages/{q1}/exclusion", headers=user.headers)
    items = client.get(f"/api/v1/conversations/{cid}/messages", headers=user.headers).json()[
        "items"
    ]
    assert {m["status"] for m in items} == {"in_memory"}


def test_exclusion_of_a_message_of_another_conversation_is_not_found(
    client: TestClient, user: ApiUser
) -> None:
    first, second = _conversation(client, user), _conversation(client, user)
    mid = _say(client, user, first, "user", "q")["id"]
    response = client.put(
        f"/api/v1/conversations/{second}/messages/{mid}/exclusion", headers=user.headers
    )
    assert response.status_code == 404


def test_messages_can_be_paged_by_seq(client: TestClient, user: ApiUser) -> None:
    cid = _conversation(client, user)
    for i in range(5):
        _say(client, user, cid, "user" if i % 2 == 0 else "assistant", f"m{i}")
    page = client.get(
        f"/api/v1/conversations/{cid}/messages", params={"limit": 2}, headers=user.headers
    ).json()
    assert [m["content"] for m in page["items"]] == ["m0", "m1"]
    rest = client.get(
        f"/api/v1/conversations/{cid}/messages",
        params={"after_seq": page["next_after_seq"]},
        headers=user.headers,
    ).json()
    assert [m["content"] for m in rest["items"]] == ["m2", "m3", "m4"]
    assert rest["next_after_seq"] is None


def test_tool_message_without_its_call_id_is_invalid(client: TestClient, user: ApiUser) -> None:
    cid = _conversation(client, user)
    response = client.post(
        f"/api/v1/conversations/{cid}/messages",
        json={"role": "tool", "content": "4"},
        headers=user.headers,
    )
    assert response.status_code == 422
    assert response.json()["error"]["code"] == "invalid_input"


def test_ctx16_files_upload_json_and_multipart_with_states(
    client: TestClient, user: ApiUser
) -> None:
    cid = _conversation(client, user)
    by_json = client.post(
        f"/api/v1/conversations/{cid}/files",
        json={"name": "notes.txt", "content": "alpha beta"},
        headers=user.headers,
    )
    assert by_json.status_code == 201, by_json.text
    assert by_json.json()["state"] == "auto" and by_json.json()["tokens"] > 0
    by_form = client.post(
        f"/api/v1/conversations/{cid}/files",
        files={"file": ("data.csv", b"a,b\n1,2\n", "text/csv")},
        headers=user.headers,
    )
    assert by_form.status_code == 201, by_form.text
    fid = by_form.json()["id"]
    assert (
        client.get(f"/api/v1/files/{fid}", headers=user.headers).json()["content"] == "a,b\n1,2\n"
    )

    pinned = client.patch(f"/api/v1/files/{fid}", json={"state": "pinned"}, headers=user.headers)
    assert pinned.json()["state"] == "pinned"
    files = client.get(f"/api/v1/conversations/{cid}/messages", headers=user.headers).json()[
        "files"
    ]
    assert {f["id"]: f["status"] for f in files}[fid] == "pinned"

    bad = client.patch(f"/api/v1/files/{fid}", json={"state": "forever"}, headers=user.headers)
    assert bad.status_code == 422 and bad.json()["error"]["code"] == "invalid_input"
    binary = client.post(
        f"/api/v1/conversations/{cid}/files",
        files={"file": ("x.bin", b"\xff\xfe\x00\x01", "application/octet-stream")},
        headers=user.headers,
    )
    assert binary.status_code == 422
