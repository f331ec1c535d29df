"""APPS-3: what an app asks goes through chatmem's server, under the model's rules.

``tools/call`` reaches tools of the app's own server only, under the same allow-list and
"ask first" approval as the model's calls, and is recorded as called by the app for that
user; ``resources/read`` reads from its own server.  A server that is down answers an error,
never a 500; somebody else's call is ``not_found``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from tests.apps.conftest import AppChat
from tests.apps.test_app_view import called, own_chat, own_server
from tests.support.app import make_user
from tests.support.mcp_app_server import WEATHER_URI, McpAppServerProcess
from tests.support.mcp_server import McpServerProcess, running_mcp_server, wait_until_ready

__all__ = ["own_chat", "own_server"]  # fixtures


def tools_call(chat: AppChat, tool_call_id: str, headers: Any = None, **body: Any) -> Any:
    return chat.client.post(
        f"/api/v1/tool-calls/{tool_call_id}/app/tools-call",
        json=body,
        headers=headers or chat.headers,
    )


def resources_read(chat: AppChat, tool_call_id: str, uri: str, headers: Any = None) -> Any:
    return chat.client.post(
        f"/api/v1/tool-calls/{tool_call_id}/app/resources-read",
        json={"uri": uri},
        headers=headers or chat.headers,
    )


def audit(chat: AppChat) -> list[dict[str, Any]]:
    response = chat.client.get("/api/v1/admin/tool-calls", headers=chat.headers)
    assert response.status_code == 200, response.text
    return list(response.json()["items"])


def test_an_app_calls_a_tool_of_its_server_and_it_is_recorded_APPS_3(
    app_chat: AppChat, app_server: McpAppServerProcess
) -> None:
    weather = called(app_chat, "get_weather", {"city": "Porto"})
    before = app_server.stats()["calls"].get("refresh_weather", 0)
    response = tools_call(app_chat, weather, name="refresh_weather", arguments={"city": "Porto"})
    assert response.status_code == 200, response.text
    result = response.json()
    assert result["isError"] is False
    assert result["structuredContent"]["city"] == "Porto"
    assert result["content"][0]["text"].startswith("Porto: 21 C")
    assert app_server.stats()["calls"]["refresh_weather"] == before + 1
    newest = audit(app_chat)[0]
    assert newest["tool"] == "refresh_weather" and newest["caller"] == "app"
    assert newest["user"]["id"] == app_chat.user.id and newest["run_id"] is None
    assert newest["conversation_id"] == app_chat.conversation_id
    assert newest["status"] == "completed"
    # The app's call is no message of the conversation: the model's history is unchanged.
    roles = [m["role"] for m in app_chat.messages()]
    assert roles == ["user", "assistant", "tool", "assistant"]


def test_a_tool_the_administrator_blocked_is_refused_to_the_app_APPS_3(
    app_chat: AppChat, app_server: McpAppServerProcess
) -> None:
    weather = called(app_chat, "get_weather")
    assert app_chat.patch_server(allowed_tools=["get_weather"]).status_code == 200
    before = app_server.stats()["calls"].get("refresh_weather", 0)
    response = tools_call(app_chat, weather, name="refresh_weather", arguments={"city": "x"})
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "forbidden"
    assert "administrator" in response.json()["error"]["message"]
    assert app_server.stats()["calls"].get("refresh_weather", 0) == before
    assert all(item["tool"] != "refresh_weather" for item in audit(app_chat))


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("model_only_lookup", "not callable by an app"),  # visibility ["model"]
        ("no_such_tool", "not a tool of the app's MCP server"),
    ],
)
def test_an_app_calls_only_what_is_its_to_call_APPS_3(
    app_chat: AppChat, name: str, why: str
) -> None:
    response = tools_call(app_chat, called(app_chat, "get_weather"), name=name, arguments={})
    assert response.status_code == 403
    assert why in response.json()["error"]["message"]


@pytest.fixture(scope="module")
def other_server() -> Iterator[McpServerProcess]:
    with running_mcp_server(token=None) as server:
        yield server


def test_an_app_never_calls_another_servers_tool_APPS_3(
    app_chat: AppChat, other_server: McpServerProcess
) -> None:
    response = app_chat.client.post(
        "/api/v1/mcp-servers",
        json={"name": "tools", "url": other_server.url},
        headers=app_chat.headers,
    )
    assert response.status_code == 201, response.text
    wait_until_ready(
        lambda path: app_chat.client.get(path, headers=app_chat.headers), response.json()["id"]
    )
    before = other_server.stats()["calls"].get("echo", 0)
    response = tools_call(
        app_chat, called(app_chat, "get_weather"), name="echo", arguments={"text": "x"}
    )
    assert response.status_code == 403
    assert other_server.stats()["calls"].get("echo", 0) == before


def test_an_ask_first_tool_waits_for_the_users_approval_APPS_3(
    app_chat: AppChat, app_server: McpAppServerProcess
) -> None:
    weather = called(app_chat, "get_weather")
    assert app_chat.patch_server(ask_first_tools=["place_order"]).status_code == 200
    before = app_server.stats()["calls"].get("place_order", 0)
    response = tools_call(app_chat, weather, name="place_order", arguments={"item": "umbrella"})
    assert response.status_code == 409
    assert response.json()["error"]["code"] == "approval_required"
    assert app_server.stats()["calls"].get("place_order", 0) == before  # not called
    response = tools_call(
        app_chat, weather, name="place_order", arguments={"item": "umbrella"}, approved=True
    )
    assert response.status_code == 200, response.text
    assert response.json()["content"][0]["text"] == "ordered one umbrella"
    assert app_server.stats()["calls"]["place_order"] == before + 1
    newest = audit(app_chat)[0]
    assert newest["tool"] == "place_order" and newest["caller"] == "app"
    assert newest["decision"]["decision"] == "approved"
    assert newest["decision"]["by"] == app_chat.user.id


def test_an_app_reads_resources_of_its_own_server_APPS_3(app_chat: AppChat) -> None:
    weather = called(app_chat, "get_weather")
    response = resources_read(app_chat, weather, WEATHER_URI)
    assert response.status_code == 200, response.text
    (content,) = response.json()["contents"]
    assert content["uri"] == WEATHER_URI and "<!doctype html>" in content["text"]
    response = resources_read(app_chat, weather, "ui://weather/missing.html")
    assert response.status_code == 422
    assert response.json()["error"]["code"] == "invalid_input"


def test_somebody_elses_app_asks_nothing_STORE_1(app_chat: AppChat) -> None:
    weather = called(app_chat, "get_weather")
    mallory = make_user(app_chat.client, "mallory")
    for response in (
        tools_call(app_chat, weather, headers=mallory.headers, name="refresh_weather"),
        resources_read(app_chat, weather, WEATHER_URI, headers=mallory.headers),
        tools_call(app_chat, "no-such-call", name="refresh_weather"),
    ):
        assert response.status_code == 404
        assert response.json()["error"]["code"] == "not_found"


@pytest.mark.parametrize(
    "body",
    [
        {"name": "refresh_weather", "arguments": ["not", "an", "object"]},
        {"name": ""},
        {"arguments": {}},
        {"name": "refresh_weather", "approved": "yes"},
        {"name": "refresh_weather", "extra": 1},
    ],
)
def test_a_malformed_call_is_refused_SEC_1(app_chat: AppChat, body: dict[str, Any]) -> None:
    response = tools_call(app_chat, called(app_chat, "get_weather"), **body)
    assert response.status_code == 422
    assert response.json()["error"]["code"] == "invalid_input"


def test_a_server_that_is_down_answers_the_app_an_error_APPS_3(
    own_chat: AppChat, own_server: McpAppServerProcess
) -> None:
    weather = called(own_chat, "get_weather")
    own_server.stop()
    response = tools_call(own_chat, weather, name="refresh_weather", arguments={"city": "x"})
    assert response.status_code == 200
    assert response.json()["isError"] is True
    # The model's words for it (one call path): the call's result is unknown, not repeated.
    assert "MCP server 'weather'" in response.json()["content"][0]["text"]
    assert audit(own_chat)[0]["status"] in ("failed", "unknown")
    response = resources_read(own_chat, weather, WEATHER_URI)
    assert response.status_code == 502
    assert response.json()["error"]["code"] == "mcp_unavailable"
    # Switched off by the administrator: the app's server is not its to use any more.
    assert own_chat.patch_server(enabled=False).status_code == 200
    response = tools_call(own_chat, weather, name="refresh_weather", arguments={"city": "x"})
    assert response.status_code == 403
