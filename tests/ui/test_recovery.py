"""Recovery in the chat (PROJ-3): a failed turn shows its error in place with Retry, the draft
is never lost, the last answer can be regenerated ("‹ 1/2 ›" switches) and the last question
edited and sent again — in real Chromium against ``chatmem serve``."""

from __future__ import annotations

from typing import Any

import pytest
from axe_playwright_python.sync_playwright import Axe
from playwright.sync_api import expect
from tests.support.model_server import FakeModelServer
from tests.ui.harness import Server, make_conversation, open_chat

pytestmark = pytest.mark.browser


def _sent_texts(model: FakeModelServer) -> list[str]:
    return [
        str(m.get("content"))
        for m in model.chat_requests[-1].messages
        if m["role"] in ("user", "assistant")
    ]


def _severe_violations(page: Any) -> list[str]:
    """axe-core's serious and critical findings on the page as it is."""
    result = Axe().run(page, options={"resultTypes": ["violations"]})
    return [
        f"{v['impact']} {v['id']}: {[n['target'] for n in v['nodes']][:5]}"
        for v in result.response["violations"]
        if v["impact"] in ("serious", "critical")
    ]


def test_a_failed_turn_shows_its_error_in_place_and_retry_answers(
    alice: Any, server: Server, model: FakeModelServer, profiles: Any
) -> None:
    with server.api("alice") as api:
        c = make_conversation(api, profiles["paid"]["id"], pairs=1, title="Failing provider")
    open_chat(alice, server, c)
    model.error(400, {"error": {"message": "The provider refused the key", "type": "auth"}})
    draft = alice.get_by_role("textbox", name="Message")
    draft.fill("What is the capital of Peru?")
    draft.press("Enter")
    error = alice.locator("#messages > .turn-error")
    expect(error).to_contain_text("The provider refused the key")
    # In place: right under the question it belongs to.
    question = alice.locator("#messages > li").nth(-2)
    expect(question).to_contain_text("What is the capital of Peru?")
    expect(error.get_by_role("button", name="Retry")).to_be_visible()
    # From stored data: a reload shows the same.
    alice.reload()
    error = alice.locator("#messages > .turn-error")
    expect(error).to_contain_text("The provider refused the key")
    assert _severe_violations(alice) == []
    model.reply("Lima.")
    error.get_by_role("button", name="Retry").click()
    answer = alice.locator("#messages > .message.role-assistant").last
    expect(answer).to_contain_text("Lima.")
    expect(alice.locator("#messages > .turn-error")).to_have_count(0)
    users = alice.locator("#messages > .message.role-user")
    expect(users).to_have_count(2)  # the question was not stored twice
    assert _sent_texts(model)[-1] == "What is the capital of Peru?"


def test_the_draft_survives_a_failed_submit_and_a_reload(
    alice: Any, server: Server, model: FakeModelServer, profiles: Any, console: Any
) -> None:
    console.allow("Failed to load resource")
    with server.api("alice") as api:
        c = make_conversation(api, profiles["paid"]["id"], pairs=1, title="Keep my draft")
    open_chat(alice, server, c)
    alice.route("**/turns", lambda route: route.abort())
    draft = alice.get_by_role("textbox", name="Message")
    text = "A long question I do not want to type twice"
    draft.fill(text)
    draft.press("Enter")
    expect(alice.locator("#chat-error")).to_be_visible()
    expect(draft).to_have_value(text)
    alice.unroute("**/turns")
    alice.reload()
    draft = alice.get_by_role("textbox", name="Message")
    expect(draft).to_have_value(text)
    model.reply("Answered at last.")
    draft.press("Enter")
    expect(alice.locator("#messages > .message.role-assistant").last).to_contain_text(
        "Answered at last."
    )
    expect(draft).to_have_value("")
    alice.reload()  # accepted: nothing comes back
    expect(alice.locator("#messages > .message.role-assistant").last).to_contain_text(
        "Answered at last."
    )
    expect(alice.get_by_role("textbox", name="Message")).to_have_value("")


def test_regenerate_keeps_the_old_answer_and_the_arrows_switch_versions(
    alice: Any, server: Server, model: FakeModelServer, profiles: Any
) -> None:
    with server.api("alice") as api:
        c = make_conversation(api, profiles["paid"]["id"], pairs=2, title="Versions")
    open_chat(alice, server, c)
    last = alice.locator("#messages > .message.role-assistant").last
    expect(last).to_contain_text("Answer 1: topic 1 is interesting.")
    model.reply("A fresh second answer.")
    last.get_by_role("button", name="Regenerate").click()
    last = alice.locator("#messages > .message.role-assistant").last
    expect(last).to_contain_text("A fresh second answer.")
    expect(last.locator(".version-count")).to_have_text("2/2")
    expect(alice.locator("#messages > .message.role-assistant")).to_have_count(2)
    assert "Answer 1: topic 1 is interesting." not in _sent_texts(model)
    last.get_by_role("button", name="Previous version of this answer").click()
    last = alice.locator("#messages > .message.role-assistant").last
    expect(last.locator(".version-count")).to_have_text("1/2")
    expect(last).to_contain_text("Answer 1: topic 1 is interesting.")
    assert _severe_violations(alice) == []
    # Only the version shown is in memory: the next request carries it, not the other.
    model.reply("Noted.")
    draft = alice.get_by_role("textbox", name="Message")
    draft.fill("Go on")
    draft.press("Enter")
    expect(alice.locator("#messages > .message.role-assistant").last).to_contain_text("Noted.")
    sent = _sent_texts(model)
    assert "Answer 1: topic 1 is interesting." in sent
    assert "A fresh second answer." not in sent


def test_edit_the_last_question_and_send_it_again(
    alice: Any, server: Server, model: FakeModelServer, profiles: Any
) -> None:
    with server.api("alice") as api:
        c = make_conversation(api, profiles["paid"]["id"], pairs=2, title="Edit")
    open_chat(alice, server, c)
    question = alice.locator("#messages > .message.role-user").last
    question.get_by_role("button", name="Edit").click()
    editor = question.get_by_role("textbox", name="Edit your message")
    expect(editor).to_have_value("Question 1: tell me about topic 1.")
    editor.fill("Question 1, better put: what about topic one?")
    model.reply("Topic one, answered.")
    question.get_by_role("button", name="Save and send").click()
    answer = alice.locator("#messages > .message.role-assistant").last
    expect(answer).to_contain_text("Topic one, answered.")
    question = alice.locator("#messages > .message.role-user").last
    expect(question).to_contain_text("Question 1, better put: what about topic one?")
    expect(question.locator(".version-count")).to_have_text("2/2")
    expect(alice.locator("#messages > .message.role-user")).to_have_count(2)
    sent = _sent_texts(model)
    assert sent[-1] == "Question 1, better put: what about topic one?"
    assert "Question 1: tell me about topic 1." not in sent
    question.get_by_role("button", name="Previous version of this question").click()
    question = alice.locator("#messages > .message.role-user").last
    expect(question).to_contain_text("Question 1: tell me about topic 1.")
    expect(alice.locator("#messages > .message.role-assistant").last).to_contain_text(
        "Answer 1: topic 1 is interesting."
    )
