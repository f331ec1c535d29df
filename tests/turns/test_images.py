"""PROJ-2 end to end: an image attached to a question reaches a vision profile as an
``image_url`` part (a data URL of the very bytes), a text-only profile as a placeholder with
the image out of memory and the reason; the bytes decide what an upload is; the Images row
counts OpenAI's tile formula."""

from __future__ import annotations

import base64
import io
from typing import Any

import pytest
from fastapi.testclient import TestClient
from PIL import Image
from tests.support.model_server import FakeModelServer
from tests.turns.conftest import Chat, make_chat

from chatmem.context.images import openai_tile_tokens
from chatmem.settings import Settings
from chatmem.web.app import create_app

VISION = {"model": "gpt-4o", "accepts_images": True}


def image_bytes(size: tuple[int, int] = (1024, 1024), fmt: str = "PNG") -> bytes:
    out = io.BytesIO()
    Image.new("RGB", size, (200, 30, 30)).save(out, fmt)
    return out.getvalue()


def upload(chat: Chat, name: str, data: bytes, mime: str = "image/png") -> Any:
    return chat.client.post(
        f"/api/v1/conversations/{chat.conversation_id}/files",
        files={"file": (name, data, mime)},
        headers=chat.headers,
    )


def ask_with(chat: Chat, content: str, file_ids: list[str]) -> dict[str, Any]:
    response = chat.client.post(
        f"/api/v1/conversations/{chat.conversation_id}/turns",
        json={"content": content, "file_ids": file_ids},
        headers=chat.headers,
    )
    assert response.status_code == 202, response.text
    return chat.wait(response.json()["run_id"])


def context(chat: Chat) -> dict[str, Any]:
    response = chat.client.get(
        f"/api/v1/conversations/{chat.conversation_id}/context", headers=chat.headers
    )
    assert response.status_code == 200, response.text
    return dict(response.json())


def test_an_image_reaches_a_vision_profile_as_an_image_url_part(
    turn_client: TestClient, model_server: FakeModelServer
) -> None:
    chat = make_chat(turn_client, model_server, profile=VISION)
    data = image_bytes((1024, 1024), "JPEG")
    stored = upload(chat, "photo.jpg", data, "image/jpeg")
    assert stored.status_code == 201, stored.text
    image = stored.json()
    assert (image["mime"], image["width"], image["height"]) == ("image/jpeg", 1024, 1024)
    model_server.reply("A red square.")
    assert ask_with(chat, "What is in this picture?", [image["id"]])["status"] == "completed"

    question = model_server.chat_requests[-1].messages[-1]
    assert question["role"] == "user"
    assert isinstance(question["content"], list), question
    text, picture = question["content"]
    assert text == {"type": "text", "text": "What is in this picture?"}
    assert picture["type"] == "image_url"
    url = picture["image_url"]["url"]
    assert url.startswith("data:image/jpeg;base64,")
    assert base64.b64decode(url.split(",", 1)[1]) == data

    # The next plan counts it with OpenAI's tile formula (1024² → 768², four tiles: 765)
    # in the Images row, in memory with its question.
    plan = context(chat)
    assert openai_tile_tokens(1024, 1024) == 765
    assert plan["tokens"]["images"] == 765
    assert plan["files"][image["id"]] == "in_memory"
    assert plan["images"][image["id"]] == {"status": "in_memory", "tokens": 765}
    assert plan["tokens"]["used"] >= 765
    # The plan names the stored file, never ships its bytes.
    assert "base64" not in str(plan["messages"])

    # The bytes are the owner's only (STORE-1) and served as what they are.
    content = chat.client.get(image["content_url"], headers=chat.headers)
    assert content.status_code == 200 and content.content == data
    assert content.headers["content-type"] == "image/jpeg"


def test_a_text_only_profile_gets_a_placeholder_and_the_image_is_out_of_memory(
    turn_client: TestClient, model_server: FakeModelServer
) -> None:
    chat = make_chat(turn_client, model_server, profile={"model": "gpt-4o"})
    image = upload(chat, "chart.png", image_bytes((640, 480))).json()
    model_server.reply("I cannot see it.")
    assert ask_with(chat, "Describe the chart", [image["id"]])["status"] == "completed"

    question = model_server.chat_requests[-1].messages[-1]
    assert question == {
        "role": "user",
        "content": "Describe the chart\n\n[image: chart.png — this model does not accept images]",
    }
    plan = context(chat)
    assert plan["files"][image["id"]] == "out_of_memory"
    assert plan["images"][image["id"]] == {
        "status": "out_of_memory",
        "tokens": 0,
        "reason": "this model does not accept images",
    }
    assert plan["tokens"]["images"] == 0

    # Switching the profile to one that takes images sends the same image next time.
    patched = chat.client.patch(
        f"/api/v1/profiles/{chat.profile_id}", json={"accepts_images": True}, headers=chat.headers
    )
    assert patched.status_code == 200
    assert context(chat)["images"][image["id"]]["status"] == "in_memory"


@pytest.mark.parametrize(
    ("name", "data", "mime"),
    [
        ("fake.png", b"just some text pretending to be a picture", "image/png"),
        ("broken.png", b"\x89PNG\r\n\x1a\n" + b"\x00" * 40, "image/png"),
        ("fake.gif", b"GIF89a" + b"nonsense", "image/gif"),
        ("script.webp", b"<svg onload=alert(1)>", "image/webp"),
    ],
)
def test_bytes_that_are_not_an_image_are_refused_whatever_the_declared_type(
    chat: Chat, name: str, data: bytes, mime: str
) -> None:
    response = upload(chat, name, data, mime)
    assert response.status_code in (400, 422), response.text
    assert response.json()["error"]["code"] == "invalid_input"
    listed = chat.client.get(
        f"/api/v1/conversations/{chat.conversation_id}/messages", headers=chat.headers
    ).json()
    assert listed["files"] == []


def test_an_image_is_recognised_by_its_bytes_not_its_declared_type(chat: Chat) -> None:
    stored = upload(chat, "upload.bin", image_bytes((300, 200), "WEBP"), "application/octet-stream")
    assert stored.status_code == 201, stored.text
    assert (stored.json()["mime"], stored.json()["width"]) == ("image/webp", 300)


def test_an_image_over_the_size_bound_is_refused(
    turn_client: TestClient, model_server: FakeModelServer
) -> None:
    chat = make_chat(turn_client, model_server)
    limit = turn_client.app.state.settings.max_image_bytes  # type: ignore[attr-defined]
    noisy = Image.frombytes("RGB", (1600, 1200), bytes(range(256)) * (1600 * 1200 * 3 // 256))
    out = io.BytesIO()
    noisy.save(out, "PNG", compress_level=0)
    data = out.getvalue()
    assert limit < len(data) < 8 * 1024 * 1024
    response = upload(chat, "huge.png", data)
    assert response.status_code == 413, response.text
    assert response.json()["error"]["code"] == "payload_too_large"


def test_another_users_conversation_cannot_take_an_image(
    turn_client: TestClient, model_server: FakeModelServer
) -> None:
    alice = make_chat(turn_client, model_server, name="alice")
    bob = make_chat(turn_client, model_server, name="bob")
    response = turn_client.post(
        f"/api/v1/conversations/{alice.conversation_id}/files",
        files={"file": ("x.png", image_bytes((10, 10)), "image/png")},
        headers=bob.headers,
    )
    assert response.status_code == 404
    mine = upload(alice, "x.png", image_bytes((10, 10))).json()
    assert turn_client.get(mine["content_url"], headers=bob.headers).status_code == 404


def test_tiles_and_flat_costs_follow_the_published_formula() -> None:
    from chatmem.context.images import image_tokens
    from chatmem.context.values import File, Profile

    # OpenAI's examples: 1024x1024 → 765; 2048x4096 → 1105; low detail 85.
    assert openai_tile_tokens(2048, 4096) == 1105
    assert openai_tile_tokens(4096, 8192, "low") == 85
    assert openai_tile_tokens(512, 512) == 255
    picture = File("f", "a.png", "", "m", mime="image/png", width=2048, height=4096)
    assert image_tokens(picture, Profile(model="gpt-4o")) == 1105
    assert image_tokens(picture, Profile(model="claude-sonnet-4")) == 1600
    assert image_tokens(picture, Profile(model="gpt-4o", image_tokens=300)) == 300


def test_images_survive_export_import_and_the_archive(
    turn_client: TestClient, model_server: FakeModelServer
) -> None:
    chat = make_chat(turn_client, model_server, profile=VISION)
    data = image_bytes((1024, 1024))
    image = upload(chat, "diagram.png", data).json()
    model_server.reply("Seen.")
    ask_with(chat, "Look", [image["id"]])
    exported = chat.client.get(
        "/api/v1/export", params={"conversation_id": chat.conversation_id}, headers=chat.headers
    ).json()
    [item] = exported["conversations"]
    [entry] = [f for f in item["files"] if f["name"] == "diagram.png"]
    assert entry["mime"] == "image/png" and base64.b64decode(entry["data_base64"]) == data

    # Imported by someone else (fresh ids where taken): the same bytes, size and tokens.
    bob = make_chat(turn_client, model_server, name="bob", profile=VISION)
    imported = turn_client.post("/api/v1/import", json=exported, headers=bob.headers)
    assert imported.status_code == 200, imported.text
    [cid] = imported.json()["conversation_ids"]
    listed = turn_client.get(f"/api/v1/conversations/{cid}/messages", headers=bob.headers).json()
    [copy] = listed["files"]
    assert (copy["mime"], copy["width"], copy["height"]) == ("image/png", 1024, 1024)
    assert turn_client.get(copy["content_url"], headers=bob.headers).content == data
    turn_client.patch(
        f"/api/v1/conversations/{cid}", json={"profile_id": bob.profile_id}, headers=bob.headers
    )
    bobs_plan = turn_client.get(f"/api/v1/conversations/{cid}/context", headers=bob.headers)
    assert bobs_plan.json()["tokens"]["images"] == 765

    # Archived and restored: still attached, still counted, still the same bytes.
    archived = chat.client.post(
        f"/api/v1/conversations/{chat.conversation_id}/archive", headers=chat.headers
    )
    assert archived.status_code == 200, archived.text
    restored = chat.client.post(
        f"/api/v1/archive/{chat.conversation_id}/restore", headers=chat.headers
    )
    assert restored.status_code == 200, restored.text
    plan = context(chat)
    assert plan["tokens"]["images"] == 765 and plan["files"][image["id"]] == "in_memory"
    assert chat.client.get(image["content_url"], headers=chat.headers).content == data


def test_other_models_cost_a_flat_amount_a_profile_may_set(
    turn_client: TestClient, model_server: FakeModelServer
) -> None:
    chat = make_chat(
        turn_client, model_server, profile={"model": "claude-sonnet-4", "accepts_images": True}
    )
    image = upload(chat, "scan.webp", image_bytes((800, 600), "WEBP")).json()
    model_server.reply("ok")
    ask_with(chat, "Read it", [image["id"]])
    assert context(chat)["tokens"]["images"] == 1600  # the default flat cost
    changed = chat.client.patch(
        f"/api/v1/profiles/{chat.profile_id}", json={"image_tokens": 300}, headers=chat.headers
    )
    assert changed.status_code == 200 and changed.json()["image_tokens"] == 300
    assert context(chat)["tokens"]["images"] == 300
    refused = chat.client.patch(
        f"/api/v1/profiles/{chat.profile_id}", json={"image_tokens": -1}, headers=chat.headers
    )
    assert refused.status_code in (400, 422)
    chat.client.patch(
        f"/api/v1/profiles/{chat.profile_id}", json={"image_tokens": None}, headers=chat.headers
    )
    assert context(chat)["tokens"]["images"] == 1600


def test_an_image_goes_with_its_question_when_the_message_quota_evicts_it(
    turn_settings: Settings, model_server: FakeModelServer
) -> None:
    with TestClient(create_app(turn_settings.model_copy(update={"max_messages": 2}))) as client:
        chat = make_chat(client, model_server, profile=VISION)
        image = upload(chat, "old.png", image_bytes((512, 512))).json()
        model_server.reply("First answer.")
        ask_with(chat, "First", [image["id"]])
        assert context(chat)["tokens"]["images"] == 255
        model_server.reply("Second answer.")
        ask_with(chat, "Second", [])
        listed = client.get(
            f"/api/v1/conversations/{chat.conversation_id}/messages", headers=chat.headers
        ).json()
        assert [m["content"] for m in listed["items"]] == ["Second", "Second answer."]
        assert listed["files"] == []
        drafting = client.get(
            f"/api/v1/conversations/{chat.conversation_id}/context",
            params={"draft": "Third"},
            headers=chat.headers,
        ).json()
        assert drafting["tokens"]["images"] == 0 and "images" not in drafting


def test_only_the_images_sent_with_a_question_go_with_it(
    turn_client: TestClient, model_server: FakeModelServer
) -> None:
    chat = make_chat(turn_client, model_server, profile=VISION)
    forgotten = upload(chat, "forgotten.png", image_bytes((64, 64))).json()
    chosen = upload(chat, "chosen.png", image_bytes((64, 64))).json()
    model_server.reply("One picture.")
    ask_with(chat, "This one", [chosen["id"]])
    parts = model_server.chat_requests[-1].messages[-1]["content"]
    assert [p["type"] for p in parts] == ["text", "image_url"]
    plan = context(chat)
    assert plan["images"][chosen["id"]]["status"] == "in_memory"
    assert plan["images"][forgotten["id"]] == {
        "status": "out_of_memory",
        "tokens": 0,
        "reason": "not attached to a message yet",
    }
