"""Issue 16: an import shows what the user saw in the app the export came from — images and
files named (or attached, when the export holds their bytes), no empty message, readable
citations, the Open WebUI system prompt, blanked conversations left out and counted, and a
single conversation object accepted.  Fixtures: ``samples/README.md``."""

from __future__ import annotations

import base64
import io
import json
import zipfile
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from tests.exchange.builders import exported, make_user, open_db, stored_messages, user_row
from tests.support.app import ApiUser

from chatmem.cli import main
from chatmem.formats.reader import read_conversations, sniff
from chatmem.formats.records import ImportedConversation
from chatmem.formats.source import ImportSource
from chatmem.settings import Settings
from chatmem.store.db import Database
from chatmem.store.exchange.importer import import_source

SAMPLES = Path(__file__).parent / "samples"
PIXEL = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)


def read(name: str) -> list[ImportedConversation]:
    return list(read_conversations(ImportSource((SAMPLES / name).open("rb"))))


def texts(conversation: ImportedConversation) -> list[tuple[str, str]]:
    return [(m.role, m.content) for m in conversation.messages]


def chatgpt_zip() -> bytes:
    """A ChatGPT data export as downloaded: conversations.json and the images beside it,
    named by their file ids (the older ``file-…-name`` and the newer ``user-…/file_…``)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.write(SAMPLES / "chatgpt_fidelity.json", "conversations.json")
        archive.writestr("chat.html", "<html></html>")
        archive.writestr("file-Painting0001AbCdEf-painting.png", PIXEL)
        archive.writestr(
            "user-Ab12/file_00000000c0ffee00aa11bb22cc33dd44-5e0c9d1a-0000-4000.png", PIXEL
        )
    return buffer.getvalue()


# --- images and files ----------------------------------------------------------------------


def test_a_chatgpt_image_without_its_bytes_is_a_placeholder_naming_it() -> None:
    painting, _, _ = read("chatgpt_fidelity.json")
    assert texts(painting) == [
        ("user", "[image: painting.png]\nInterpret this painting "),
        ("assistant", "A calm harbour at dusk, painted in the manner of the Impressionists."),
        # an image-only message, and a PDF sent along that no part shows
        ("user", "[file: provenance.pdf]\n[image: detail.png]"),
    ]
    assert painting.files == ()


def test_a_chatgpt_zip_holding_the_images_makes_them_attachments() -> None:
    source = ImportSource(io.BytesIO(chatgpt_zip()))
    painting = next(iter(read_conversations(source)))
    first, _, third = painting.messages
    assert first.content == "Interpret this painting "  # the image is attached, not named
    # attachment-only: it keeps its attachment and says so in the text
    assert third.content == "[file: provenance.pdf]\n[image: detail.png]"
    assert [(f.message_id, f.name, f.mime, f.data) for f in painting.files] == [
        (first.id, "painting.png", "image/png", PIXEL),
        (third.id, "detail.png", "image/png", PIXEL),
    ]


def test_claude_image_only_and_attachment_only_messages_keep_a_placeholder() -> None:
    painting, _ = read("claude_fidelity.json")
    assert texts(painting) == [
        ("user", "[image: painting.png]"),
        ("assistant", "It shows a harbour at dusk."),
        ("user", "[attachment: provenance.txt]"),
        ("assistant", "A Lisbon dealer, then."),
        ("user", "[image: harbour-2.jpg]\nCompare it with this one"),
    ]
    (attached,) = painting.files
    assert (attached.name, attached.content, attached.message_id) == (
        "provenance.txt",
        "Bought in Lisbon, 1921, from a dealer.",
        "d-m3",
    )


def test_open_webui_inline_image_is_an_attachment_and_a_file_a_placeholder() -> None:
    (tutor,) = read("openwebui_fidelity.json")
    assert texts(tutor) == [
        ("user", "[image: image-1.png]"),
        ("assistant", "Arr, a single pixel o' treasure!"),
        ("user", "[file: chapter-3.pdf]\nSummarise this chapter"),
        ("assistant", "Chapter three be about the map, matey."),
    ]
    (image,) = tutor.files
    assert (image.message_id, image.mime, image.data) == ("o1", "image/png", PIXEL)


# --- citations, instructions ---------------------------------------------------------------


def test_chatgpt_citation_markers_become_readable_references() -> None:
    _, tolstoy, _ = read("chatgpt_fidelity.json")
    (_, answer) = tolstoy.messages
    assert answer.content == (
        "Leo Tolstoy published it in 1869. "
        "([Wikipedia](https://en.wikipedia.org/wiki/War_and_Peace)) It first ran as a serial."
    )
    assert not any("\ue200" <= c <= "\ue2ff" for c in answer.content)


def test_open_webui_system_prompt_becomes_the_instructions() -> None:
    (tutor,) = read("openwebui_fidelity.json")
    assert tutor.extra["instructions"] == "You are a patient tutor who talks like a pirate."


# --- through the store: empty conversations, single objects --------------------------------


@pytest.mark.parametrize(
    ("name", "imported", "empty"),
    [("chatgpt_fidelity.json", 2, 1), ("claude_fidelity.json", 1, 1)],
)
def test_blank_conversations_are_skipped_and_counted(
    db: Database, name: str, imported: int, empty: int
) -> None:
    uid = make_user(db, "ann")
    with db.session() as session:
        result = import_source(
            session, user_row(session, uid), ImportSource((SAMPLES / name).open("rb"))
        )
    assert (result.imported, result.skipped_empty) == (imported, empty)
    assert result.as_json()["skipped_empty"] == empty


@pytest.mark.parametrize(
    ("name", "fmt", "title"),
    [
        ("chatgpt_single_conversation.json", "chatgpt", "One conversation"),
        ("claude_single_conversation.json", "claude", "One Claude conversation"),
    ],
)
def test_a_single_conversation_object_is_accepted(name: str, fmt: str, title: str) -> None:
    assert sniff(ImportSource((SAMPLES / name).open("rb"))) == fmt
    (conversation,) = read(name)
    assert conversation.title == title
    assert len(conversation.messages) == 2


def test_over_http_nothing_empty_is_stored_and_images_are_files(
    client: TestClient, user: ApiUser
) -> None:
    h = user.headers
    answer = client.post("/api/v1/import", content=chatgpt_zip(), headers=h)
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert (body["imported"], body["skipped_empty"], body["skipped"]) == (2, 1, 0)
    for raw in ("claude_fidelity.json", "openwebui_fidelity.json"):
        answer = client.post("/api/v1/import", content=(SAMPLES / raw).read_bytes(), headers=h)
        assert answer.status_code == 200, answer.text
    single = client.post(
        "/api/v1/import",
        content=(SAMPLES / "chatgpt_single_conversation.json").read_bytes(),
        headers=h,
    )
    assert single.json()["imported"] == 1
    listed = client.get("/api/v1/conversations", headers=h).json()["items"]
    assert "Imported conversation" not in [c["title"] for c in listed]
    by_title = {c["title"]: c["id"] for c in listed}
    for cid in by_title.values():
        items = client.get(f"/api/v1/conversations/{cid}/messages", headers=h).json()["items"]
        assert items and all(m["content"].strip() for m in items)
    tutor = client.get(f"/api/v1/conversations/{by_title['Pirate tutor']}", headers=h).json()
    assert tutor["instructions"] == "You are a patient tutor who talks like a pirate."
    painting = by_title["Interpret this painting"]
    files = client.get(f"/api/v1/conversations/{painting}/messages", headers=h).json()["files"]
    assert sorted(f["name"] for f in files) == ["detail.png", "painting.png"]
    image = client.get(f"/api/v1/files/{files[0]['id']}/content", headers=h)
    assert (image.headers["content-type"], image.content) == ("image/png", PIXEL)


def test_cli_reports_the_blank_conversations_it_skipped(
    settings: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = Settings()  # as the command will read it from the environment
    settings.state_dir.mkdir(parents=True, exist_ok=True)
    db = open_db(settings.sqlalchemy_url())
    try:
        from chatmem.store import accounts

        with db.session() as session:
            accounts.create_user(session, "root", is_admin=True)
    finally:
        db.dispose()
    try:
        main(["import", str(SAMPLES / "claude_fidelity.json")])
    except SystemExit as exc:
        assert not exc.code
    out = capsys.readouterr().out
    assert "Imported 1 conversation(s) with 5 message(s) from a Claude export" in out
    assert "1 without any text, skipped" in out


# --- reasoning models' thinking --------------------------------------------------------------


def _import_json(db: Database, document: object, user: str = "ann") -> list[str]:
    uid = make_user(db, user)
    raw = io.BytesIO(json.dumps(document).encode())
    with db.session() as session:
        return list(
            import_source(session, user_row(session, uid), ImportSource(raw)).conversation_ids
        )


def _stored(db: Database, conversation_id: str) -> list[tuple[str, str, object]]:
    return [
        (r[2], r[3], (r[8] or {}).get("reasoning")) for r in stored_messages(db, conversation_id)
    ]


OPENWEBUI_REASONING = {
    "id": "owui-r1",
    "title": "Thinking chat",
    "created_at": 1730000000,
    "updated_at": 1730000100,
    "chat": {
        "history": {
            "currentId": "a1",
            "messages": {
                "u1": {
                    "id": "u1",
                    "parentId": None,
                    "role": "user",
                    "content": "2+2?",
                    "timestamp": 1730000000,
                },
                "a1": {
                    "id": "a1",
                    "parentId": "u1",
                    "role": "assistant",
                    "timestamp": 1730000010,
                    # As Open WebUI stores a reasoning model's answer: the thinking folded in.
                    "content": '<details type="reasoning" done="true" duration="3">\n'
                    "<summary>Thought for 3 seconds</summary>\n"
                    "> Two plus two.\n> That is four.\n</details>\nIt is **4**.",
                },
            },
        },
        "messages": [],
    },
}


def test_open_webui_thinking_folds_become_the_answers_reasoning(db: Database) -> None:
    (cid,) = _import_json(db, [OPENWEBUI_REASONING])
    assert _stored(db, cid) == [
        ("user", "2+2?", None),
        ("assistant", "It is **4**.", "Two plus two.\nThat is four."),
    ]


def test_chatgpt_thoughts_become_the_following_answers_reasoning(db: Database) -> None:
    def node(nid: str, parent: str | None, message: dict[str, object]) -> dict[str, object]:
        return {"id": nid, "parent": parent, "children": [], "message": {"id": nid, **message}}

    mapping = {
        "u": node(
            "u",
            None,
            {
                "author": {"role": "user"},
                "content": {"content_type": "text", "parts": ["Plan a trip"]},
            },
        ),
        "t": node(
            "t",
            "u",
            {
                "author": {"role": "assistant"},
                "recipient": "all",
                "content": {
                    "content_type": "thoughts",
                    "thoughts": [
                        {
                            "summary": "Weighing the options",
                            "content": "Rome or Lisbon; Lisbon is cheaper.",
                            "finished": True,
                        },
                    ],
                },
            },
        ),
        "r": node(
            "r",
            "t",
            {
                "author": {"role": "assistant"},
                "content": {"content_type": "reasoning_recap", "content": "Thought for 4 seconds"},
            },
        ),
        "a": node(
            "a",
            "r",
            {
                "author": {"role": "assistant"},
                "recipient": "all",
                "content": {"content_type": "text", "parts": ["Go to Lisbon."]},
            },
        ),
    }
    document = [
        {
            "id": "gpt-r1",
            "title": "Trip",
            "create_time": 1730000000.0,
            "current_node": "a",
            "mapping": mapping,
        }
    ]
    (cid,) = _import_json(db, document)
    assert _stored(db, cid) == [
        ("user", "Plan a trip", None),
        ("assistant", "Go to Lisbon.", "Weighing the options\nRome or Lisbon; Lisbon is cheaper."),
    ]


def test_reasoning_survives_the_chatmem_round_trip_and_is_never_planned(
    db: Database, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (cid,) = _import_json(db, [OPENWEBUI_REASONING])
    (conversation,) = exported(db, [cid])
    assert conversation["messages"][1]["reasoning"] == "Two plus two.\nThat is four."
    assert "reasoning" not in conversation["messages"][0]
    document = {"format": "chatmem.export/1", "conversations": [conversation]}
    (again,) = _import_json(db, document, user="bob")
    assert _stored(db, again) == _stored(db, cid)
    # The engine reads the same file: the plan sends the answer alone.
    path = tmp_path / "one.json"
    path.write_text(json.dumps(document))
    with pytest.raises(SystemExit) as ended:
        main(["context", "plan", str(path)])
    assert ended.value.code in (0, None)
    plan = json.loads(capsys.readouterr().out)
    assert {"role": "assistant", "content": "It is **4**."} in plan["messages"]
    assert "Two plus two" not in json.dumps(plan["messages"])


def test_claude_extended_thinking_becomes_the_answers_reasoning(db: Database) -> None:
    document = [
        {
            "uuid": "claude-r1",
            "name": "Primes",
            "created_at": "2026-11-01T10:00:00Z",
            "updated_at": "2026-11-01T10:01:00Z",
            "chat_messages": [
                {
                    "uuid": "q",
                    "sender": "human",
                    "text": "Is 91 prime?",
                    "content": [{"type": "text", "text": "Is 91 prime?"}],
                    "created_at": "2026-11-01T10:00:00Z",
                },
                {
                    "uuid": "a",
                    "sender": "assistant",
                    "text": "No: 91 = 7 × 13.",
                    "content": [
                        {"type": "thinking", "thinking": "91 / 7 = 13, so it is not prime."},
                        {"type": "text", "text": "No: 91 = 7 × 13."},
                    ],
                    "created_at": "2026-11-01T10:00:05Z",
                },
            ],
        }
    ]
    (cid,) = _import_json(db, document)
    assert _stored(db, cid) == [
        ("user", "Is 91 prime?", None),
        ("assistant", "No: 91 = 7 × 13.", "91 / 7 = 13, so it is not prime."),
    ]
