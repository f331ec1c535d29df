"""Around the chat: model profiles (PROF-1, PROF-2), the archive (ARCH-1), export and import
with progress (STORE-5)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect
from tests.support.model_server import FakeModelServer
from tests.ui.harness import Server, json_items, make_conversation, make_profile

pytestmark = pytest.mark.browser


def test_prof2_profiles_page_adds_a_model_key_is_write_only_and_connection_tests(
    alice: Any, server: Server, model: FakeModelServer
) -> None:
    alice.get_by_role("link", name="Models").click()
    alice.get_by_role("button", name="Add a model").click()
    alice.get_by_label("Name", exact=True).fill("My fake model")
    alice.get_by_label("Base URL").fill(model.base_url)
    alice.get_by_label("Model id").fill("fake-model")
    alice.get_by_label("API key").fill("sk-very-secret-key")
    alice.get_by_label("Context window (tokens)").fill("65536")
    alice.get_by_role("button", name="Save").click()
    row = alice.locator("#profile-list li", has_text="My fake model")
    expect(row.locator(".key-state")).to_have_text("Key set")
    expect(row).to_contain_text("66K tokens")
    assert "sk-very-secret-key" not in alice.content()
    # Editing shows that a key is set, never the key itself.
    row.get_by_role("button", name="Edit").click()
    expect(alice.get_by_label("API key")).to_have_value("")
    expect(alice.locator("#pf-key-state")).to_have_text("Key set")
    alice.get_by_role("button", name="Cancel").click()
    row.get_by_role("button", name="Test connection").click()
    expect(row.locator(".test-result")).to_contain_text("Connection works")
    assert model.requests[-1].headers["authorization"] == "Bearer sk-very-secret-key"
    # Stored keys never reach the browser.
    with server.api("alice") as api:
        listed = api.get("/api/v1/profiles").json()
    assert "sk-very-secret-key" not in json.dumps(listed)


def test_profiles_page_shows_refused_endpoints(alice: Any, server: Server, console: Any) -> None:
    console.allow("4[0-9][0-9]")
    alice.goto(server.url + "/profiles")
    alice.get_by_role("button", name="Add a model").click()
    alice.get_by_label("Name", exact=True).fill("Bad")
    alice.get_by_label("Base URL").fill("ftp://example.invalid/v1")
    alice.get_by_label("Model id").fill("m")
    alice.get_by_role("button", name="Save").click()
    expect(alice.locator("#profile-error")).to_be_visible()
    expect(alice.locator("#profile-list li", has_text="Bad")).to_have_count(0)


def test_arch1_archive_is_read_only_restores_and_deletes(
    alice: Any, server: Server, model: FakeModelServer
) -> None:
    with server.api("alice") as api:
        profile = make_profile(api, model.base_url, "Archive model")
        keep = make_conversation(api, profile["id"], pairs=2, title="Old project notes")
        gone = make_conversation(api, profile["id"], pairs=1, title="Disposable chat")
        api.post(f"/api/v1/conversations/{gone['id']}/archive").raise_for_status()
    # Archive from the chat's menu.
    alice.goto(server.url + "/c/" + keep["id"])
    expect(alice.locator("#chat-title")).to_have_text("Old project notes")
    alice.get_by_role("button", name="Chat actions").click()
    alice.get_by_role("button", name="Archive", exact=True).click()
    expect(alice).to_have_url(server.url + "/")
    expect(alice.locator("#conversation-list")).not_to_contain_text("Old project notes")
    alice.get_by_role("link", name="Archive", exact=True).click()
    expect(alice.get_by_role("heading", name="Archived conversations")).to_be_visible()
    alice.get_by_placeholder("Search archived chats by title").fill("project")
    items = alice.locator("#archive-list li")
    expect(items).to_have_count(1)
    items.first.get_by_role("link").click()
    view = alice.locator("#archive-view")
    expect(view.locator(".badge")).to_have_text("Read-only")
    expect(view.locator(".message")).to_have_count(4)
    expect(view).to_contain_text("Question 1: tell me about topic 1.")
    expect(view.locator("textarea, input")).to_have_count(0)
    view.get_by_role("button", name="Restore").click()
    expect(alice).to_have_url(server.url + "/c/" + keep["id"])
    expect(alice.locator("#messages > .message")).to_have_count(4)
    # Permanent deletion.
    alice.goto(server.url + "/archive/" + gone["id"])
    expect(alice.locator("#archive-title")).to_have_text("Disposable chat")
    alice.once("dialog", lambda d: d.accept())
    alice.get_by_role("button", name="Delete permanently").click()
    expect(alice.locator("#archive-view")).to_be_hidden()
    expect(alice.locator("#archive-list")).not_to_contain_text("Disposable chat")
    with server.api("alice") as api:
        assert api.get(f"/api/v1/archive/{gone['id']}").status_code == 404


def test_store5_export_downloads_and_import_shows_progress(
    alice: Any, server: Server, model: FakeModelServer, tmp_path: Path
) -> None:
    with server.api("alice") as api:
        profile = make_profile(api, model.base_url, "Export model")
        make_conversation(api, profile["id"], pairs=2, title="Exported chat")
    alice.goto(server.url + "/")
    with alice.expect_download() as info:
        alice.get_by_role("link", name="Export all").click()
    exported = tmp_path / "export.json"
    info.value.save_as(exported)
    doc = json.loads(exported.read_text())
    assert doc["format"] == "chatmem.export/1"
    assert "Exported chat" in [c["title"] for c in doc["conversations"]]
    # Import a new conversation (a bigger file, so the upload reports progress).
    doc = {
        "format": "chatmem.export/1",
        "conversations": [
            {
                "id": "imp1",
                "title": "Imported from elsewhere",
                "folder": "Imports",
                "pinned": True,
                "mode": "economy",
                "summary": None,
                "files": [],
                "messages": [
                    {
                        "id": f"x{i}",
                        "role": "user" if i % 2 == 0 else "assistant",
                        "content": f"imported message {i} " + "padding " * 200,
                        "excluded": False,
                        "created_at": "2026-11-30T10:00:00Z",
                    }
                    for i in range(200)
                ],
            }
        ],
    }
    upload = tmp_path / "import.json"
    upload.write_text(json.dumps(doc))
    alice.evaluate("""() => { window.__progress = [];
        new MutationObserver(() => window.__progress.push(document.getElementById('import-progress-box').hidden))
          .observe(document.getElementById('import-progress-box'), {attributes: true}); }""")
    alice.locator("#import-file").set_input_files(str(upload))
    expect(alice.locator("#import-result")).to_have_text("Imported 1 conversation.")
    assert False in alice.evaluate("window.__progress"), "the progress bar was shown"
    expect(alice.locator("#conversation-list > li").first).to_contain_text(
        "Imported from elsewhere"
    )
    expect(alice.get_by_role("button", name="Imports", exact=True)).to_be_visible()
    # The same file again creates no duplicate.
    alice.locator("#import-file").set_input_files(str(upload))
    expect(alice.locator("#import-result")).to_contain_text(
        "Imported 0 conversations. 1 already present."
    )
    with server.api("alice") as api:
        titles = [
            c["title"] for c in json_items(api.get("/api/v1/conversations?q=Imported").json())
        ]
    assert titles.count("Imported from elsewhere") == 1


def test_store5_a_malformed_import_is_refused_clearly(
    alice: Any, tmp_path: Path, console: Any
) -> None:
    console.allow("4[0-9][0-9]")
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "something else"}')
    alice.locator("#import-file").set_input_files(str(bad))
    expect(alice.locator("#import-result")).to_contain_text("Import failed:")
    expect(alice.locator("#import-result")).to_have_class("form-error")
