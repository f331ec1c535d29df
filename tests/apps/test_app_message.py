"""APPS-3 ``ui/message``: what an app sends becomes the user's next message, a normal turn,
shown as coming from the app."""

from __future__ import annotations

from typing import Any

from tests.apps.conftest import AppChat
from tests.apps.test_app_view import called
from tests.turns.conftest import make_chat


def history(chat: AppChat) -> list[dict[str, Any]]:
    response = chat.client.get(
        f"/api/v1/conversations/{chat.conversation_id}/messages", headers=chat.headers
    )
    assert response.status_code == 200, response.text
    return list(response.json()["items"])


def from_app(chat: AppChat, content: str, tool_call_id: str) -> Any:
    return chat.client.post(
        f"/api/v1/conversations/{chat.conversation_id}/turns",
        json={"content": content, "app_tool_call_id": tool_call_id},
        headers=chat.headers,
    )


def test_an_apps_message_starts_a_turn_shown_as_the_apps_APPS_3(app_chat: AppChat) -> None:
    weather = called(app_chat, "get_weather")
    app_chat.model.reply("A light jacket.")
    response = from_app(app_chat, "What should I wear in Lisbon today?", weather)
    assert response.status_code == 202, response.text
    assert app_chat.wait(response.json()["run_id"])["status"] == "completed"
    question, answer = history(app_chat)[-2:]
    assert (
        question["role"] == "user" and question["content"] == "What should I wear in Lisbon today?"
    )
    assert question["from_app"] == {"tool_call_id": weather, "tool": "get_weather"}
    assert answer["content"] == "A light jacket." and answer["from_app"] is None
    # The model got it as the user's message, like any other.
    sent = app_chat.model.chat_requests[-1].body["messages"]
    assert sent[-1] == {"role": "user", "content": "What should I wear in Lisbon today?"}
    # A message typed by the user says it came from nobody's app.
    assert history(app_chat)[0]["from_app"] is None


def test_only_an_app_of_this_conversation_sends_its_messages_APPS_3(app_chat: AppChat) -> None:
    plain = called(app_chat, "plain_echo", {"text": "x"})
    other = make_chat(app_chat.client, app_chat.model, name="bob")
    weather_of_other = AppChat(**vars(other))
    before = len(history(app_chat))
    for tool_call_id in (plain, "no-such-call"):
        response = from_app(app_chat, "Hello from nowhere", tool_call_id)
        assert response.status_code == 404, response.text
        assert response.json()["error"]["code"] == "not_found"
    assert len(history(app_chat)) == before  # nothing stored
    # Somebody else's conversation knows nothing of this call either.
    weather = called(app_chat, "get_weather")
    response = from_app(weather_of_other, "Hi", weather)
    assert response.status_code == 404
