"""APPS-4: the Live Workspace keeps one app open beside the conversation across turns and
reloads; an administrator may name a server's tool as the workspace ("Open Live
Workspace" calls it for the user, no model turn)."""

from __future__ import annotations

from typing import Any

from tests.apps.conftest import AppChat
from tests.apps.test_app_view import called, get_app
from tests.support.app import make_user
from tests.support.mcp_app_server import WEATHER_URI, McpAppServerProcess


def conversation(chat: AppChat, headers: Any = None) -> Any:
    return chat.client.get(
        f"/api/v1/conversations/{chat.conversation_id}", headers=headers or chat.headers
    )


def put_workspace(chat: AppChat, tool_call_id: str, headers: Any = None) -> Any:
    return chat.client.put(
        f"/api/v1/conversations/{chat.conversation_id}/workspace",
        json={"tool_call_id": tool_call_id},
        headers=headers or chat.headers,
    )


def open_workspace(chat: AppChat, **body: Any) -> Any:
    return chat.client.post(
        f"/api/v1/conversations/{chat.conversation_id}/workspace/open",
        json=body,
        headers=chat.headers,
    )


def test_the_workspace_keeps_an_app_open_across_turns_APPS_4(app_chat: AppChat) -> None:
    assert conversation(app_chat).json()["workspace"] is None
    weather = called(app_chat, "get_weather")
    response = put_workspace(app_chat, weather)
    assert response.status_code == 200, response.text
    assert response.json() == {"tool_call_id": weather}
    app_chat.model.reply("Sure.")
    app_chat.turn("Another question")
    assert conversation(app_chat).json()["workspace"] == {"tool_call_id": weather}
    response = app_chat.client.delete(
        f"/api/v1/conversations/{app_chat.conversation_id}/workspace", headers=app_chat.headers
    )
    assert response.status_code == 204
    assert conversation(app_chat).json()["workspace"] is None


def test_only_an_app_of_this_conversation_goes_in_its_workspace_APPS_4(
    app_chat: AppChat,
) -> None:
    plain = called(app_chat, "plain_echo", {"text": "x"})
    for tool_call_id in (plain, "no-such-call"):
        response = put_workspace(app_chat, tool_call_id)
        assert response.status_code == 404
        assert response.json()["error"]["code"] == "not_found"
    weather = called(app_chat, "get_weather")
    mallory = make_user(app_chat.client, "mallory")
    assert put_workspace(app_chat, weather, headers=mallory.headers).status_code == 404
    response = app_chat.client.delete(
        f"/api/v1/conversations/{app_chat.conversation_id}/workspace", headers=mallory.headers
    )
    assert response.status_code == 404
    assert conversation(app_chat, headers=mallory.headers).status_code == 404
    assert conversation(app_chat).json()["workspace"] is None


def test_the_administrators_workspace_tool_opens_without_a_turn_APPS_4(
    app_chat: AppChat, app_server: McpAppServerProcess
) -> None:
    workspaces = app_chat.client.get("/api/v1/apps/workspaces", headers=app_chat.headers)
    assert workspaces.status_code == 200 and workspaces.json() == []
    assert app_chat.patch_server(workspace_tool="get_weather").status_code == 200
    bob = make_user(app_chat.client, "bob")  # any signed-in user may open it
    listed = app_chat.client.get("/api/v1/apps/workspaces", headers=bob.headers).json()
    assert listed == [
        {"server_id": app_chat.server_id, "server_name": "weather", "tool": "get_weather"}
    ]
    requests = len(app_chat.model.chat_requests)
    calls = app_server.stats()["calls"].get("get_weather", 0)
    response = open_workspace(app_chat, server_id=app_chat.server_id)
    assert response.status_code == 200, response.text
    tool_call_id = response.json()["tool_call_id"]
    assert conversation(app_chat).json()["workspace"] == {"tool_call_id": tool_call_id}
    assert app_server.stats()["calls"]["get_weather"] == calls + 1
    assert len(app_chat.model.chat_requests) == requests  # no model turn
    assert app_chat.messages() == []
    app = get_app(app_chat, tool_call_id).json()
    assert app["resource_uri"] == WEATHER_URI and app["input"] == {}
    assert app["result"]["structuredContent"]["city"] == "Lisbon"
    items = app_chat.client.get("/api/v1/admin/tool-calls", headers=app_chat.headers).json()
    assert (items["items"][0]["tool"], items["items"][0]["caller"]) == ("get_weather", "app")
    # Switched to showing no apps, the server offers no workspace.
    assert app_chat.patch_server(show_apps=False).status_code == 200
    assert app_chat.client.get("/api/v1/apps/workspaces", headers=bob.headers).json() == []
    assert open_workspace(app_chat, server_id=app_chat.server_id).status_code == 404


def test_a_server_without_a_workspace_tool_opens_none_APPS_4(app_chat: AppChat) -> None:
    for server_id in (app_chat.server_id, "no-such-server"):
        response = open_workspace(app_chat, server_id=server_id)
        assert response.status_code == 404
        assert response.json()["error"]["code"] == "not_found"
    assert conversation(app_chat).json()["workspace"] is None


def test_an_ask_first_workspace_tool_waits_for_the_user_APPS_4(app_chat: AppChat) -> None:
    assert (
        app_chat.patch_server(
            workspace_tool="get_weather", ask_first_tools=["get_weather"]
        ).status_code
        == 200
    )
    response = open_workspace(app_chat, server_id=app_chat.server_id)
    assert response.status_code == 409
    assert response.json()["error"]["code"] == "approval_required"
    assert conversation(app_chat).json()["workspace"] is None
    response = open_workspace(app_chat, server_id=app_chat.server_id, approved=True)
    assert response.status_code == 200, response.text
    assert conversation(app_chat).json()["workspace"] == response.json()
