"""Regenerate, edit and resend, switch versions, retry (PROJ-3) through the HTTP API.

Only the version shown is in memory: each test checks what the fake model server received
(exactly what chatmem sent), the plan and the statuses."""

from __future__ import annotations

import json
from typing import Any

from tests.support.app import make_user
from tests.support.runs import finished_run
from tests.turns.conftest import Chat


def _path(chat: Chat, suffix: str = "") -> str:
    return f"/api/v1/conversations/{chat.conversation_id}{suffix}"


def _turn(chat: Chat, content: str, reply: str) -> dict[str, Any]:
    chat.model.reply(reply)
    return finished_run(chat.client, chat.start(content), chat.headers)


def _listed(chat: Chat, **params: Any) -> list[dict[str, Any]]:
    response = chat.client.get(_path(chat, "/messages"), params=params, headers=chat.headers)
    assert response.status_code == 200, response.text
    return list(response.json()["items"])


def _shown(chat: Chat) -> list[tuple[str, str]]:
    return [(m["role"], m["content"]) for m in _listed(chat)]


def _regenerate(chat: Chat, message_id: str, reply: str | None = None) -> dict[str, Any]:
    if reply is not None:
        chat.model.reply(reply)
    response = chat.client.post(
        _path(chat, f"/messages/{message_id}/regenerate"), headers=chat.headers
    )
    assert response.status_code == 202, response.text
    return finished_run(chat.client, response.json()["run_id"], chat.headers)


def _edit(chat: Chat, message_id: str, content: str, reply: str) -> dict[str, Any]:
    chat.model.reply(reply)
    response = chat.client.post(
        _path(chat, f"/messages/{message_id}/edit"), json={"content": content}, headers=chat.headers
    )
    assert response.status_code == 202, response.text
    return finished_run(chat.client, response.json()["run_id"], chat.headers)


def _switch(chat: Chat, message_id: str, index: int) -> Any:
    return chat.client.put(
        _path(chat, f"/messages/{message_id}/version"), json={"index": index}, headers=chat.headers
    )


def _sent(chat: Chat) -> list[tuple[str, str]]:
    """The user and assistant messages of the last request the model received."""
    return [
        (m["role"], m["content"])
        for m in chat.model.chat_requests[-1].messages
        if m["role"] in ("user", "assistant")
    ]


def _plan(chat: Chat) -> dict[str, Any]:
    response = chat.client.get(_path(chat, "/context"), headers=chat.headers)
    assert response.status_code == 200, response.text
    return dict(response.json())


def test_regenerate_keeps_the_old_answer_as_version_one_of_two(chat: Chat) -> None:
    _turn(chat, "Name a colour", "Red")
    question, answer = _listed(chat)
    assert (answer["version"], answer["versions"]) == (1, 1)
    run = _regenerate(chat, answer["id"], "Blue")
    assert run["status"] == "completed"
    # The model got the question once and no old answer: only the shown version is sent.
    assert _sent(chat) == [("user", "Name a colour")]
    shown = _listed(chat)
    assert [(m["role"], m["content"]) for m in shown] == [
        ("user", "Name a colour"),
        ("assistant", "Blue"),
    ]
    assert shown[0]["id"] == question["id"]  # the question is not stored twice
    assert (shown[1]["version"], shown[1]["versions"], shown[1]["version_kind"]) == (
        2,
        2,
        "answer",
    )
    everything = _listed(chat, hidden="true")
    old = next(m for m in everything if m["id"] == answer["id"])
    assert old["hidden"] is True and old["status"] == "hidden" and old["version"] == 1
    plan = _plan(chat)
    assert plan["status"][answer["id"]] == "hidden"
    assert plan["status"][shown[1]["id"]] == "in_memory"
    assert {"role": "assistant", "content": "Red"} not in plan["messages"]
    # The next turn sends the shown answer only.
    _turn(chat, "And another?", "Green")
    assert _sent(chat) == [
        ("user", "Name a colour"),
        ("assistant", "Blue"),
        ("user", "And another?"),
    ]


def test_switching_versions_changes_what_the_next_request_sends(chat: Chat) -> None:
    _turn(chat, "Pick a number", "Seven")
    _regenerate(chat, _listed(chat)[1]["id"], "Three")
    shown_answer = _listed(chat)[1]
    response = _switch(chat, shown_answer["id"], 1)
    assert response.status_code == 200, response.text
    assert response.json() == {"kind": "answer", "version": 1, "versions": 2}
    assert _shown(chat) == [("user", "Pick a number"), ("assistant", "Seven")]
    assert _listed(chat)[1]["version"] == 1
    plan = _plan(chat)
    assert plan["status"][shown_answer["id"]] == "hidden"
    _turn(chat, "Double it", "Fourteen")
    assert _sent(chat) == [
        ("user", "Pick a number"),
        ("assistant", "Seven"),
        ("user", "Double it"),
    ]
    # Back to version 2 of the first answer: the later pair stays.
    first_answer = _listed(chat)[1]
    assert _switch(chat, first_answer["id"], 2).status_code == 200
    assert _shown(chat) == [
        ("user", "Pick a number"),
        ("assistant", "Three"),
        ("user", "Double it"),
        ("assistant", "Fourteen"),
    ]
    bad = _switch(chat, _listed(chat)[1]["id"], 3)
    assert bad.status_code in (400, 422) and bad.json()["error"]["code"] == "invalid_input"


def test_edit_the_last_question_and_resend(chat: Chat) -> None:
    _turn(chat, "First question", "First answer")
    _turn(chat, "Capital of Frence?", "Did you mean France?")
    question = _listed(chat)[2]
    run = _edit(chat, question["id"], "Capital of France?", "Paris")
    assert run["status"] == "completed"
    assert _sent(chat) == [
        ("user", "First question"),
        ("assistant", "First answer"),
        ("user", "Capital of France?"),
    ]
    shown = _listed(chat)
    assert [(m["role"], m["content"]) for m in shown] == [
        ("user", "First question"),
        ("assistant", "First answer"),
        ("user", "Capital of France?"),
        ("assistant", "Paris"),
    ]
    assert (shown[2]["version"], shown[2]["versions"], shown[2]["version_kind"]) == (
        2,
        2,
        "question",
    )
    # Back to the first version: the old question with its own answer.
    assert _switch(chat, shown[2]["id"], 1).json()["version"] == 1
    assert _shown(chat)[2:] == [
        ("user", "Capital of Frence?"),
        ("assistant", "Did you mean France?"),
    ]
    plan = _plan(chat)
    assert plan["status"][shown[2]["id"]] == "hidden"
    assert plan["status"][shown[3]["id"]] == "hidden"
    assert {"role": "user", "content": "Capital of France?"} not in plan["messages"]
    # Only the last question can be edited, only the last answer regenerated.
    first = _listed(chat)[0]
    refused = chat.client.post(
        _path(chat, f"/messages/{first['id']}/edit"), json={"content": "x"}, headers=chat.headers
    )
    assert refused.status_code in (400, 422)
    assert refused.json()["error"]["code"] == "invalid_input"
    refused = chat.client.post(
        _path(chat, f"/messages/{first['id']}/regenerate"), headers=chat.headers
    )
    assert refused.json()["error"]["code"] == "invalid_input"


def test_retry_after_a_provider_error_answers_in_place(chat: Chat) -> None:
    _turn(chat, "Warm-up", "Ready")
    chat.model.error(400, {"error": {"message": "upstream refused", "type": "invalid_request"}})
    failed = finished_run(chat.client, chat.start("Tell me a joke"), chat.headers)
    assert failed["status"] == "failed"
    question = _listed(chat)[-1]
    assert question["role"] == "user" and question["content"] == "Tell me a joke"
    # The failure is on record with the question (seen again after a reload).
    assert question["error"]["run_id"] == failed["id"]
    assert question["error"]["message"]
    run = _regenerate(chat, question["id"], "Why did the chicken…")
    assert run["status"] == "completed"
    shown = _listed(chat)
    assert [(m["role"], m["content"]) for m in shown][-2:] == [
        ("user", "Tell me a joke"),
        ("assistant", "Why did the chicken…"),
    ]
    assert [m["role"] for m in shown].count("user") == 2  # no duplicate question
    assert shown[-2]["error"] is None
    assert shown[-1]["versions"] == 1  # a failed attempt that said nothing is no version
    assert _sent(chat)[-1] == ("user", "Tell me a joke")


def test_another_users_conversation_is_not_found(chat: Chat) -> None:
    _turn(chat, "Mine", "Yours truly")
    question, answer = _listed(chat)
    other = make_user(chat.client, "mallory")
    for method, suffix, body in (
        ("POST", f"/messages/{answer['id']}/regenerate", None),
        ("POST", f"/messages/{question['id']}/edit", {"content": "hijack"}),
        ("PUT", f"/messages/{answer['id']}/version", {"index": 1}),
    ):
        response = chat.client.request(
            method, _path(chat, suffix), json=body, headers=other.headers
        )
        assert response.status_code == 404, (suffix, response.text)
        assert response.json()["error"]["code"] == "not_found"
    assert _shown(chat) == [("user", "Mine"), ("assistant", "Yours truly")]


def test_regenerate_while_a_turn_runs_is_refused(chat: Chat) -> None:
    _turn(chat, "First", "One")
    answer = _listed(chat)[1]
    chat.model.reply("slow " * 20, delay=0.05)
    run_id = chat.start("Second")
    for method, suffix, body in (
        ("POST", f"/messages/{answer['id']}/regenerate", None),
        ("PUT", f"/messages/{answer['id']}/version", {"index": 1}),
    ):
        response = chat.client.request(method, _path(chat, suffix), json=body, headers=chat.headers)
        assert response.status_code == 409, response.text
        assert response.json()["error"]["code"] == "turn_running"
    finished_run(chat.client, run_id, chat.headers)


def test_versions_survive_export_import_and_the_archive(chat: Chat, tmp_path: Any) -> None:
    from chatmem.cli.context import run_plan

    _turn(chat, "Colour?", "Red")
    _regenerate(chat, _listed(chat)[1]["id"], "Blue")
    _edit(chat, _listed(chat)[0]["id"], "Favourite colour?", "Green")
    shown = _shown(chat)
    assert shown == [("user", "Favourite colour?"), ("assistant", "Green")]
    exported = chat.client.get(
        "/api/v1/export", params={"conversation_id": chat.conversation_id}, headers=chat.headers
    )
    assert exported.status_code == 200
    (item,) = exported.json()["conversations"]
    hidden = [m["content"] for m in item["messages"] if m.get("hidden")]
    assert sorted(hidden) == ["Blue", "Colour?", "Red"]  # kept, and marked as not shown
    assert {v["kind"] for v in item["versions"]} == {"answer", "question"}
    # The offline plan of the file sends only the version shown.
    path = tmp_path / "export.json"
    path.write_bytes(exported.content)
    plan = run_plan(path)
    assert [m["content"] for m in plan["messages"] if m["role"] != "system"] == [
        "Favourite colour?",
        "Green",
    ]
    assert sorted(s for s in plan["status"].values() if s == "hidden") == ["hidden"] * 3
    # Another account imports it: the same shown history, the versions still switchable.
    other = make_user(chat.client, "bob")
    response = chat.client.post(
        "/api/v1/import",
        content=exported.content,
        headers={**other.headers, "Content-Type": "application/json"},
    )
    assert response.status_code == 200, response.text
    (new_id,) = response.json()["conversation_ids"]
    again = chat.client.get(
        "/api/v1/export", params={"conversation_id": new_id}, headers=other.headers
    ).json()["conversations"][0]
    same = ("role", "content", "hidden", "excluded")  # the ids were taken: new ones
    assert [{k: m.get(k) for k in same} for m in again["messages"]] == [
        {k: m.get(k) for k in same} for m in item["messages"]
    ]
    ids = {m["id"]: n["id"] for m, n in zip(item["messages"], again["messages"], strict=True)}
    assert again["versions"] == [
        {**v, "slot": ids[v["slot"]], "message_ids": [ids[m] for m in v["message_ids"]]}
        for v in item["versions"]
    ]
    listed = chat.client.get(f"/api/v1/conversations/{new_id}/messages", headers=other.headers)
    assert [(m["content"], m["version"], m["versions"]) for m in listed.json()["items"]] == [
        ("Favourite colour?", 2, 2),
        ("Green", 1, 1),
    ]
    # Archived and restored: the same.
    archived = chat.client.post(_path(chat, "/archive"), headers=chat.headers)
    assert archived.status_code == 200, archived.text
    restored = chat.client.post(
        f"/api/v1/archive/{chat.conversation_id}/restore", headers=chat.headers
    )
    assert restored.status_code == 200, restored.text
    assert _shown(chat) == shown
    question = _listed(chat)[0]
    assert (question["version"], question["versions"]) == (2, 2)
    assert _switch(chat, question["id"], 1).status_code == 200
    assert _shown(chat) == [("user", "Colour?"), ("assistant", "Blue")]
    assert json.dumps(_plan(chat)["messages"]).count("Red") == 0


def test_an_answer_the_summary_ends_at_keeps_its_version(chat: Chat) -> None:
    """CTX-9: the memory's summary ends at a message; hiding it would leave the summary
    covering nothing, so that version cannot change (the plan stays as it was)."""
    from chatmem.store.summaries import add_summary

    _turn(chat, "Remember 42", "Noted: 42")
    question, answer = _listed(chat)
    with chat.client.app.state.db.session() as session:  # type: ignore[attr-defined]
        add_summary(
            session,
            chat.conversation_id,
            first_message_id=question["id"],
            through_message_id=answer["id"],
            message_count=2,
            text="The number is 42.",
            focus=None,
            cost=0.0,
            model=None,
        )
    before = _plan(chat)
    response = chat.client.post(
        _path(chat, f"/messages/{answer['id']}/regenerate"), headers=chat.headers
    )
    assert response.status_code in (400, 422), response.text
    assert response.json()["error"]["code"] == "invalid_input"
    assert _shown(chat) == [("user", "Remember 42"), ("assistant", "Noted: 42")]
    assert _plan(chat) == before


def test_an_edited_question_keeps_its_files(chat: Chat) -> None:
    uploaded = chat.client.post(
        _path(chat, "/files"),
        files={"file": ("notes.txt", b"The launch code is 0000.", "text/plain")},
        headers=chat.headers,
    )
    assert uploaded.status_code in (200, 201), uploaded.text
    file_id = uploaded.json()["id"]
    chat.model.reply("Read it.")
    response = chat.client.post(
        _path(chat, "/turns"),
        json={"content": "Read my notes", "file_ids": [file_id]},
        headers=chat.headers,
    )
    finished_run(chat.client, response.json()["run_id"], chat.headers)
    question = _listed(chat)[0]
    _edit(chat, question["id"], "Read my notes, please", "Read it again.")
    edited = _listed(chat)[0]
    assert "The launch code is 0000." in json.dumps(chat.model.chat_requests[-1].messages)
    body = chat.client.get(_path(chat, "/messages"), headers=chat.headers).json()
    assert [f["message_id"] for f in body["files"]] == [edited["id"]]
    assert _switch(chat, edited["id"], 1).status_code == 200
    body = chat.client.get(_path(chat, "/messages"), headers=chat.headers).json()
    assert [f["message_id"] for f in body["files"]] == [question["id"]]
