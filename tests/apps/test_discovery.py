"""APPS-1 discovery: a server's tools keep their apps; the administrator's switches.

Listing a server's tools keeps each tool's app (its ``ui://`` resource and who may call it,
declared the current way or the older ``_meta["ui/resourceUri"]``); the administrators' view
shows it, with ``show_apps`` (on by default) and the workspace tool.  A tool only its app may
call is never offered to the model.
"""

from __future__ import annotations

from typing import Any

import pytest
from tests.apps.conftest import AppChat
from tests.support.mcp_app_server import CLOCK_URI, WEATHER_URI

from chatmem.tools.apps import ToolApp, tool_app
from chatmem.tools.toolbox import KnownTool


def tools_by_name(server: dict[str, Any]) -> dict[str, Any]:
    return {tool["name"]: tool for tool in server["tools"]}


def test_the_admin_view_shows_each_tools_app_APPS_1(app_chat: AppChat) -> None:
    server = app_chat.server()
    assert server["show_apps"] is True and server["workspace_tool"] is None
    assert server["app_permissions"] == []
    tools = tools_by_name(server)
    assert tools["get_weather"]["app"] == {
        "resource_uri": WEATHER_URI,
        "visibility": ["model", "app"],
    }
    assert tools["refresh_weather"]["app"]["visibility"] == ["app"]
    assert tools["model_only_lookup"]["app"]["visibility"] == ["model"]
    assert tools["legacy_clock"]["app"] == {
        "resource_uri": CLOCK_URI,
        "visibility": ["model", "app"],
    }
    assert tools["plain_echo"]["app"] is None
    # The list of every server says the same.
    listed = app_chat.client.get("/api/v1/mcp-servers", headers=app_chat.headers).json()
    assert listed["items"][0]["tools"] == server["tools"]


def test_a_tool_only_its_app_may_call_is_never_offered_to_the_model_APPS_1(
    app_chat: AppChat,
) -> None:
    app_chat.model.reply("Hello.")
    app_chat.turn("Which tools?")
    offered = {t["function"]["name"] for t in app_chat.model.chat_requests[-1].body["tools"]}
    assert {"get_weather", "place_order", "model_only_lookup", "plain_echo"} <= offered
    assert "refresh_weather" not in offered
    # The plan counts what a turn offers: the same schemas, without it.
    plan = app_chat.client.get(
        f"/api/v1/conversations/{app_chat.conversation_id}/context", headers=app_chat.headers
    ).json()
    assert plan["tokens"]["tools"] > 0


def test_show_apps_and_the_workspace_tool_are_the_administrators_APPS_4(
    app_chat: AppChat,
) -> None:
    response = app_chat.patch_server(workspace_tool="get_weather", show_apps=False)
    assert response.status_code == 200, response.text
    assert response.json()["workspace_tool"] == "get_weather"
    assert response.json()["show_apps"] is False
    assert app_chat.server()["show_apps"] is False
    response = app_chat.patch_server(workspace_tool=None, show_apps=True)
    assert response.json()["workspace_tool"] is None and response.json()["show_apps"] is True


@pytest.mark.parametrize(
    "fields",
    [
        {"workspace_tool": "plain_echo"},  # a tool without an app
        {"workspace_tool": "no_such_tool"},
        {"app_permissions": ["root"]},
        {"show_apps": "yes"},
    ],
)
def test_a_workspace_tool_without_an_app_is_refused_APPS_4(
    app_chat: AppChat, fields: dict[str, Any]
) -> None:
    response = app_chat.patch_server(**fields)
    assert response.status_code in (400, 422), response.text
    assert response.json()["error"]["code"] == "invalid_input"
    assert app_chat.server()["workspace_tool"] is None


def test_the_administrator_allows_app_permissions_APPS_2(app_chat: AppChat) -> None:
    response = app_chat.patch_server(app_permissions=["clipboard_write", "camera"])
    assert response.status_code == 200, response.text
    assert response.json()["app_permissions"] == ["camera", "clipboard_write"]


def test_only_an_administrator_changes_a_servers_apps_APPS_1(app_chat: AppChat) -> None:
    from tests.support.app import make_user

    bob = make_user(app_chat.client, "bob")
    response = app_chat.client.patch(
        f"/api/v1/mcp-servers/{app_chat.server_id}", json={"show_apps": False}, headers=bob.headers
    )
    assert response.status_code == 403
    assert app_chat.server()["show_apps"] is True


@pytest.mark.parametrize(
    ("meta", "app"),
    [
        ({"ui": {"resourceUri": "ui://a/b.html"}}, ToolApp("ui://a/b.html")),
        ({"ui/resourceUri": "ui://old/x"}, ToolApp("ui://old/x")),
        (
            {"ui": {"resourceUri": "ui://a", "visibility": ["app", "bogus"]}},
            ToolApp("ui://a", ("app",)),
        ),
        ({"ui": {"resourceUri": "https://example.com/app.html"}}, None),  # not ui://
        ({"ui": {"resourceUri": 7}}, None),
        (None, None),
        ({"other": 1}, None),
    ],
)
def test_a_tools_meta_names_its_app_APPS_1(meta: Any, app: ToolApp | None) -> None:
    assert tool_app(meta) == app


def test_a_known_tool_keeps_its_app_across_its_stored_form_APPS_1() -> None:
    tool = KnownTool("get_weather", "d", {"type": "object"}, ToolApp("ui://w", ("app",)))
    assert KnownTool.parse(tool.to_json()) == tool
    # A list stored before apps existed reads as tools without apps.
    assert KnownTool.parse({"name": "old", "description": ""}) == KnownTool("old")
