"""APPS-1: a tool call with an app keeps its whole result, and says where its app is.

The call's record (``tool_call_id``) and its app (``{"resource_uri"}``, or null) come with the
``tool_call`` and ``tool_result`` events and with the answer's tool calls in the messages;
the whole ``CallToolResult`` — ``content`` *and* ``structuredContent`` — is stored with the
call, not only the text the model reads.
"""

from __future__ import annotations

from typing import Any

from tests.apps.conftest import AppChat
from tests.support.mcp_app_server import WEATHER_URI, McpAppServerProcess

from chatmem.store.tables.runs import ToolCallRow


def call_tool(chat: AppChat, tool: str, arguments: dict[str, Any]) -> tuple[str, list[Any]]:
    chat.model.tool_call(tool, arguments, id=f"call_{tool}")
    chat.model.reply("Done.")
    run_id = chat.start(f"Use {tool}")
    chat.wait(run_id)
    return run_id, chat.events(run_id)


def stored_call(chat: AppChat, row_id: str) -> ToolCallRow:
    with chat.client.app.state.db.session() as session:  # type: ignore[attr-defined]
        row = session.get(ToolCallRow, row_id)
        assert row is not None
        session.expunge(row)
        return row


def answer_calls(chat: AppChat) -> list[dict[str, Any]]:
    response = chat.client.get(
        f"/api/v1/conversations/{chat.conversation_id}/messages", headers=chat.headers
    )
    assert response.status_code == 200, response.text
    return [c for m in response.json()["items"] for c in m["tool_calls"]]


def test_a_call_with_an_app_keeps_its_whole_result_APPS_1(app_chat: AppChat) -> None:
    _, events = call_tool(app_chat, "get_weather", {"city": "Porto"})
    call = next(e["data"] for e in events if e["event"] == "tool_call")
    result = next(e["data"] for e in events if e["event"] == "tool_result")
    assert call["app"] == result["app"] == {"resource_uri": WEATHER_URI}
    assert call["tool_call_id"] == result["tool_call_id"]
    row = stored_call(app_chat, call["tool_call_id"])
    assert row.caller == "model" and row.app_uri == WEATHER_URI
    assert row.result_json is not None
    assert row.result_json["structuredContent"]["city"] == "Porto"
    assert row.result_json["content"][0]["text"].startswith("Porto: 21 C")
    assert row.result_json["isError"] is False
    # The answer's tool call in the history says the same.
    (listed,) = answer_calls(app_chat)
    assert listed["id"] == "call_get_weather"
    assert listed["tool_call_id"] == call["tool_call_id"]
    assert listed["app"] == {"resource_uri": WEATHER_URI}


def test_a_call_without_an_app_has_its_record_and_no_app_APPS_1(app_chat: AppChat) -> None:
    _, events = call_tool(app_chat, "plain_echo", {"text": "hi"})
    call = next(e["data"] for e in events if e["event"] == "tool_call")
    assert call["app"] is None and call["tool_call_id"]
    (listed,) = answer_calls(app_chat)
    assert listed["app"] is None and listed["tool_call_id"] == call["tool_call_id"]
    whole = stored_call(app_chat, call["tool_call_id"]).result_json
    assert whole is not None
    assert whole["content"] == [{"type": "text", "text": "hi"}] and whole["isError"] is False


def test_a_server_that_shows_no_apps_shows_none_APPS_1(app_chat: AppChat) -> None:
    assert app_chat.patch_server(show_apps=False).status_code == 200
    _, events = call_tool(app_chat, "get_weather", {"city": "Faro"})
    call = next(e["data"] for e in events if e["event"] == "tool_call")
    assert call["app"] is None
    (listed,) = answer_calls(app_chat)
    assert listed["app"] is None
    # Switched on again, the stored call shows its app: the switch is about showing.
    assert app_chat.patch_server(show_apps=True).status_code == 200
    (listed,) = answer_calls(app_chat)
    assert listed["app"] == {"resource_uri": WEATHER_URI}


def test_the_record_of_a_call_says_the_model_made_it_APPS_3(app_chat: AppChat) -> None:
    call_tool(app_chat, "get_weather", {})
    items = app_chat.client.get("/api/v1/admin/tool-calls", headers=app_chat.headers).json()
    assert [(i["tool"], i["caller"]) for i in items["items"]] == [("get_weather", "model")]


def test_a_result_past_the_size_bound_keeps_its_text_only_APPS_1() -> None:
    from chatmem.tools.results import kept_result

    whole = {"content": [{"type": "text", "text": "x" * 5000}]}
    assert kept_result(whole, 10_000) == whole
    assert kept_result(whole, 4_000) is None


def test_a_tool_offered_under_its_servers_name_keeps_its_app_APPS_1(
    app_chat: AppChat, app_server: McpAppServerProcess
) -> None:
    from tests.apps.conftest import register

    # Servers are read by name: "second" takes get_weather, "weather" offers its own as
    # weather_get_weather.
    register(app_chat.client, app_chat, app_server.url, name="second")
    _, events = call_tool(app_chat, "weather_get_weather", {"city": "Tavira"})
    call = next(e["data"] for e in events if e["event"] == "tool_call")
    result = next(e["data"] for e in events if e["event"] == "tool_result")
    assert result["content"].startswith("Tavira"), result
    assert call["app"] == result["app"] == {"resource_uri": WEATHER_URI}
    (listed,) = answer_calls(app_chat)
    assert listed["app"] == {"resource_uri": WEATHER_URI}
