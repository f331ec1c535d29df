"""PROJ-1 and PROJ-2 in the browser: a project is created from the sidebar with its
instructions and a file, a new chat in it sends them to the model; an image attached to a
question shows in the feed, reaches a vision model as an image part and is counted in the
memory window's Images row."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
from PIL import Image
from playwright.sync_api import expect
from tests.support.model_server import FakeModelServer
from tests.ui.harness import Server, make_profile, save_screenshot

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def vision(server: Server, model: FakeModelServer) -> dict[str, Any]:
    with server.api("alice") as api:
        return make_profile(
            api, model.base_url, "Vision model", model="gpt-4o", accepts_images=True
        )


def test_a_project_from_the_sidebar_and_a_new_chat_in_it(
    alice: Any, model: FakeModelServer, vision: Any, tmp_path: Path
) -> None:
    alice.once("dialog", lambda d: d.accept("Handbook"))
    alice.get_by_role("button", name="New project").click()
    dialog = alice.locator("#project-dialog")
    expect(dialog).to_be_visible()
    expect(alice.get_by_label("Name", exact=True)).to_have_value("Handbook")
    alice.get_by_label("Instructions (sent with every chat in the project)").fill(
        "Always answer as the handbook's editor."
    )
    alice.get_by_role("button", name="Save").click()
    guide = tmp_path / "style.md"
    guide.write_text("Use short sentences.", encoding="utf-8")
    alice.locator("#project-file").set_input_files(str(guide))
    expect(dialog.locator("#project-files")).to_contain_text("style.md")
    save_screenshot(alice, "project.png", readme=True)
    alice.get_by_role("link", name="New chat in this project").click()
    alice.wait_for_selector("#draft")
    expect(alice.locator("#project-list")).to_contain_text("Handbook")
    expect(alice.locator("#chat-title")).to_have_text("New chat in Handbook")

    alice.locator("#model-select").select_option(vision["id"])
    model.reply("Noted, editor here.")
    alice.get_by_role("textbox", name="Message").fill("Hello project")
    alice.get_by_role("button", name="Send").click()
    expect(alice.locator(".message.role-assistant").last).to_contain_text("Noted, editor here.")
    sent = model.chat_requests[-1].messages
    assert sent[0] == {"role": "system", "content": "Always answer as the handbook's editor."}
    assert {"role": "system", "content": "File style.md:\n\nUse short sentences."} in sent

    # The chat is listed in its project.
    alice.locator("#project-list").get_by_role("button", name="Handbook").click()
    expect(alice.locator("#project-chats")).to_contain_text("Hello project")


def test_an_image_in_the_feed_and_in_the_images_row(
    alice: Any, model: FakeModelServer, vision: Any, tmp_path: Path
) -> None:
    picture = tmp_path / "sunset.png"
    out = io.BytesIO()
    Image.new("RGB", (1024, 1024), (250, 120, 40)).save(out, "PNG")
    picture.write_bytes(out.getvalue())

    alice.locator("#model-select").select_option(vision["id"])
    alice.get_by_role("textbox", name="Message").fill("What colour is this?")
    alice.locator("#attach-file").set_input_files(str(picture))
    expect(alice.locator("#attachments")).to_contain_text("sunset.png")
    model.reply("Orange.")
    alice.get_by_role("button", name="Send").click()
    expect(alice.locator(".message.role-assistant").last).to_contain_text("Orange.")

    question = model.chat_requests[-1].messages[-1]
    assert question["content"][0] == {"type": "text", "text": "What colour is this?"}
    assert question["content"][1]["image_url"]["url"].startswith("data:image/png;base64,")

    image = alice.locator(".message.role-user figure.attached-image img")
    expect(image).to_be_visible()
    expect(image).to_have_attribute("alt", "sunset.png")
    # The browser loaded the bytes (the owner-only content URL) and they are the picture.
    alice.wait_for_function(
        "() => { const i = document.querySelector('.role-user figure.attached-image img');"
        " return i && i.complete && i.naturalWidth > 0; }"
    )
    assert alice.evaluate("(img) => img.naturalWidth", image.element_handle()) == 1024
    save_screenshot(alice, "images.png", readme=True)

    alice.locator("#counter").click()
    row = alice.locator("#mw-breakdown tr[data-key=images] td")
    expect(row).to_have_text("765")
    expect(alice.locator("#memory-window .file-list li", has_text="sunset.png")).to_contain_text(
        "765 tokens"
    )


def test_a_profile_is_marked_as_taking_images_on_the_models_page(
    alice: Any, server: Server, model: FakeModelServer
) -> None:
    alice.get_by_role("link", name="Models").click()
    alice.get_by_role("button", name="Add a model").click()
    alice.get_by_label("Name", exact=True).fill("Eyes")
    alice.get_by_label("Base URL").fill(model.base_url)
    alice.get_by_label("Model id").fill("some-vision-model")
    alice.get_by_label("Accepts images").check()
    alice.get_by_label("Tokens per image").fill("500")
    alice.get_by_role("button", name="Save").click()
    expect(alice.locator("#profile-list li", has_text="Eyes")).to_be_visible()
    with server.api("alice") as api:
        [eyes] = [p for p in api.get("/api/v1/profiles").json()["items"] if p["name"] == "Eyes"]
    assert (eyes["accepts_images"], eyes["image_tokens"]) == (True, 500)
