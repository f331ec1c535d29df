"""APPS-1, APPS-2: ``GET /api/v1/tool-calls/{id}/app`` — what the feed renders an app from.

chatmem's server fetches the app's HTML from the MCP server (never the browser), caches it
per server, URI and server version, refuses one over 2 MB, and gives it with the call's
input and whole result as stored (the tool is not called again), the CSP domains the
resource declares and the permissions it asked for *and* the administrator allowed.  A
server that is down costs nothing: the stored result, a note, no error.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from tests.apps.conftest import AppChat, register
from tests.support.app import make_user
from tests.support.mcp_app_server import (
    BASE_URI_DOMAINS,
    CLOCK_URI,
    CONNECT_DOMAINS,
    FRAME_DOMAINS,
    RESOURCE_DOMAINS,
    WEATHER_URI,
    McpAppServerProcess,
    running_mcp_app_server,
)
from tests.support.model_server import FakeModelServer
from tests.turns.conftest import make_chat

from chatmem.tools.app_host import UNREACHABLE


def called(chat: AppChat, tool: str, arguments: dict[str, Any] | None = None) -> str:
    """Runs a turn in which the model calls ``tool``; the call's record id."""
    chat.model.tool_call(tool, arguments or {}, id=f"call_{tool}_{time.monotonic_ns()}")
    chat.model.reply("Done.")
    run_id = chat.start(f"Use {tool}")
    chat.wait(run_id)
    return next(
        e["data"]["tool_call_id"] for e in chat.events(run_id) if e["event"] == "tool_result"
    )


def get_app(chat: AppChat, tool_call_id: str, headers: Any = None) -> Any:
    return chat.client.get(
        f"/api/v1/tool-calls/{tool_call_id}/app", headers=headers or chat.headers
    )


def test_the_app_is_served_from_the_stored_call_APPS_1(
    app_chat: AppChat, app_server: McpAppServerProcess
) -> None:
    reads = app_server.stats()["reads"].get(WEATHER_URI, 0)
    tool_call_id = called(app_chat, "get_weather", {"city": "Porto"})
    calls = app_server.stats()["calls"]["get_weather"]
    response = get_app(app_chat, tool_call_id)
    assert response.status_code == 200, response.text
    app = response.json()
    assert app["html"].startswith("<!doctype html>") and "ui/initialize" in app["html"]
    assert app["tool_call_id"] == tool_call_id
    assert app["conversation_id"] == app_chat.conversation_id
    assert (app["server_id"], app["server_name"], app["tool"]) == (
        app_chat.server_id,
        "weather",
        "get_weather",
    )
    assert app["resource_uri"] == WEATHER_URI
    assert app["csp"] == {
        "connect_domains": CONNECT_DOMAINS,
        "resource_domains": RESOURCE_DOMAINS,
        "frame_domains": FRAME_DOMAINS,
        "base_uri_domains": BASE_URI_DOMAINS,
    }
    # Asked for (camera, clipboard) but allowed by no administrator: none granted.
    assert app["permissions"] == {
        "camera": False,
        "microphone": False,
        "geolocation": False,
        "clipboard_write": False,
    }
    assert app["prefers_border"] is True
    assert app["input"] == {"city": "Porto"}
    assert app["result"]["structuredContent"]["city"] == "Porto"
    assert app["result"]["content"][0]["type"] == "text"
    assert app["status"] == "completed" and app["text"].startswith("Porto: 21 C")
    assert app["available"] is True and app["note"] is None
    # Shown again: from the cache, and the tool is never called again.
    assert get_app(app_chat, tool_call_id).json()["html"] == app["html"]
    stats = app_server.stats()
    assert stats["reads"][WEATHER_URI] == reads + 1
    assert stats["calls"]["get_weather"] == calls


def test_permissions_are_the_ones_asked_for_and_allowed_APPS_2(app_chat: AppChat) -> None:
    assert app_chat.patch_server(app_permissions=["camera", "microphone"]).status_code == 200
    app = get_app(app_chat, called(app_chat, "get_weather")).json()
    # camera: asked and allowed; microphone: allowed, not asked; clipboard: asked, not allowed.
    assert app["permissions"] == {
        "camera": True,
        "microphone": False,
        "geolocation": False,
        "clipboard_write": False,
    }


def test_an_app_declared_the_older_way_is_served_APPS_1(app_chat: AppChat) -> None:
    app = get_app(app_chat, called(app_chat, "legacy_clock")).json()
    assert app["resource_uri"] == CLOCK_URI
    assert "a clock declared the older way" in app["html"]
    assert app["csp"]["connect_domains"] == [] and app["prefers_border"] is None


def test_an_app_over_two_megabytes_is_refused_in_place_APPS_1(
    app_chat: AppChat, app_server: McpAppServerProcess
) -> None:
    reads = app_server.stats()["reads"].get("ui://big/app.html", 0)
    tool_call_id = called(app_chat, "big_app")
    for _ in range(2):
        app = get_app(app_chat, tool_call_id).json()
        assert app["html"] is None and app["available"] is False
        assert "larger than the 2 MB" in app["note"]
        assert app["text"] == "big"  # the stored result, shown instead
    assert app_server.stats()["reads"]["ui://big/app.html"] == reads + 1  # not again


def test_only_the_conversations_owner_sees_its_apps_STORE_1(app_chat: AppChat) -> None:
    tool_call_id = called(app_chat, "get_weather")
    mallory = make_user(app_chat.client, "mallory")
    response = get_app(app_chat, tool_call_id, headers=mallory.headers)
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"
    assert get_app(app_chat, "no-such-call").status_code == 404


def test_a_call_without_an_app_or_with_apps_off_has_none_APPS_1(app_chat: AppChat) -> None:
    assert get_app(app_chat, called(app_chat, "plain_echo", {"text": "x"})).status_code == 404
    tool_call_id = called(app_chat, "get_weather")
    assert app_chat.patch_server(show_apps=False).status_code == 200
    assert get_app(app_chat, tool_call_id).status_code == 404
    assert app_chat.patch_server(show_apps=True).status_code == 200
    assert get_app(app_chat, tool_call_id).status_code == 200


@pytest.fixture
def own_server() -> Iterator[McpAppServerProcess]:
    """A server of the test's own, to stop and restart."""
    with running_mcp_app_server() as server:
        yield server


@pytest.fixture
def own_chat(
    turn_client: TestClient, model_server: FakeModelServer, own_server: McpAppServerProcess
) -> AppChat:
    chat = AppChat(**vars(make_chat(turn_client, model_server, admin=True)))
    chat.server_id = register(turn_client, chat, own_server.url)
    return chat


def test_a_server_that_went_down_costs_the_chat_nothing_APPS_1(
    own_chat: AppChat, own_server: McpAppServerProcess
) -> None:
    shown = called(own_chat, "get_weather", {"city": "Braga"})
    never_shown = called(own_chat, "legacy_clock")  # another app, never fetched
    html = get_app(own_chat, shown).json()["html"]
    own_server.stop()
    began = time.monotonic()
    # Its HTML never fetched, and the server is gone: the stored text result and a note.
    response = get_app(own_chat, never_shown)
    assert response.status_code == 200
    assert response.json()["html"] is None and response.json()["available"] is False
    assert response.json()["note"] == UNREACHABLE
    assert response.json()["text"] == "12:00"
    # The failed read told chatmem's session the server is away (PROV-3 health) ...
    deadline = time.monotonic() + 15
    while own_chat.server()["health"]["state"] == "ready":
        assert time.monotonic() < deadline
        time.sleep(0.02)
    # ... and the app fetched before is given from chatmem's copy, not live.
    app = get_app(own_chat, shown).json()
    assert app["html"] == html
    assert app["available"] is False and app["note"] == UNREACHABLE
    assert app["result"]["structuredContent"]["city"] == "Braga"
    assert time.monotonic() - began < 10


def test_a_new_server_version_is_fetched_again_APPS_1(
    own_chat: AppChat, own_server: McpAppServerProcess
) -> None:
    tool_call_id = called(own_chat, "get_weather")
    assert "<span id='label'>v1</span>" in get_app(own_chat, tool_call_id).json()["html"]
    own_server.stop()
    with running_mcp_app_server(port=own_server.port, version="2.0.0", label="v2"):
        # chatmem's session learns the server changed on its next request (here a turn's
        # call; else its periodic listing, PROV-3) and connects again: to version 2.0.0.
        called(own_chat, "plain_echo", {"text": "are you there?"})
        deadline = time.monotonic() + 30
        while True:
            app = get_app(own_chat, tool_call_id).json()
            if app["available"] and "<span id='label'>v2</span>" in app["html"]:
                break
            assert time.monotonic() < deadline, app["note"]
            time.sleep(0.05)
