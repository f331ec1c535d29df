"""Fixtures for the MCP Apps tests (APPS-1 … APPS-4): a real MCP server with apps
(:mod:`tests.support.mcp_app_server`, a subprocess) registered by an administrator whose
chat (:class:`~tests.turns.conftest.Chat`) runs on the fake model server."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from tests.support.mcp_app_server import McpAppServerProcess, running_mcp_app_server
from tests.support.mcp_server import wait_until_ready
from tests.support.model_server import FakeModelServer
from tests.turns.conftest import Chat, make_chat, turn_client, turn_settings

__all__ = ["turn_client", "turn_settings"]  # fixtures, shared with the turn tests


@pytest.fixture(scope="module")
def app_server() -> Iterator[McpAppServerProcess]:
    with running_mcp_app_server() as server:
        yield server


class AppChat(Chat):
    """An administrator's chat with the app server registered (``server_id``)."""

    server_id: str = ""

    def patch_server(self, **fields: Any) -> Any:
        return self.client.patch(
            f"/api/v1/mcp-servers/{self.server_id}", json=fields, headers=self.headers
        )

    def server(self) -> dict[str, Any]:
        response = self.client.get(f"/api/v1/mcp-servers/{self.server_id}", headers=self.headers)
        assert response.status_code == 200, response.text
        return dict(response.json())


def register(client: TestClient, chat: Chat, url: str, **fields: Any) -> str:
    response = client.post(
        "/api/v1/mcp-servers", json={"name": "weather", "url": url, **fields}, headers=chat.headers
    )
    assert response.status_code == 201, response.text
    server_id = str(response.json()["id"])
    wait_until_ready(lambda path: client.get(path, headers=chat.headers), server_id)
    return server_id


@pytest.fixture
def app_chat(
    turn_client: TestClient, model_server: FakeModelServer, app_server: McpAppServerProcess
) -> AppChat:
    chat = make_chat(turn_client, model_server, admin=True)
    app_chat = AppChat(**vars(chat))
    app_chat.server_id = register(turn_client, chat, app_server.url)
    return app_chat
