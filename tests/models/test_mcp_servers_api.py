"""TURN-4 / PROF-4: admin-only MCP server configuration, policy-checked URLs, secret headers."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient
from tests.support.app import ApiUser, make_user

from chatmem.models import mcp_servers
from chatmem.security.endpoints import EndpointPolicy, StaticResolver
from chatmem.settings import Settings
from chatmem.store.tables.profiles import McpServer
from chatmem.web.app import create_app

TOKEN = "mcp-bearer-TOKEN-93c1d0"
pytestmark = pytest.mark.parametrize("backend", ["sqlite"])


@pytest.fixture
def api(settings: Settings) -> Iterator[TestClient]:
    app = create_app(settings)
    app.state.endpoint_policy = EndpointPolicy(
        resolver=StaticResolver(
            {"tools.public.test": ["93.184.216.34"], "tools.inside.test": ["10.0.0.3"]}
        )
    )
    with TestClient(app) as client:
        yield client


@pytest.fixture
def admin(api: TestClient) -> ApiUser:
    return make_user(api, "root", admin=True)


def test_admin_creates_lists_changes_and_deletes(api: TestClient, admin: ApiUser) -> None:
    created = api.post(
        "/api/v1/mcp-servers",
        json={"name": "search", "url": "https://tools.public.test/mcp", "bearer_token": TOKEN},
        headers=admin.headers,
    )
    assert created.status_code == 201, created.text
    server = created.json()
    assert server["has_headers"] is True and server["enabled"] is True
    listed = api.get("/api/v1/mcp-servers", headers=admin.headers)
    assert [s["id"] for s in listed.json()["items"]] == [server["id"]]
    patched = api.patch(
        f"/api/v1/mcp-servers/{server['id']}", json={"enabled": False}, headers=admin.headers
    )
    assert patched.json()["enabled"] is False and patched.json()["has_headers"] is True
    cleared = api.patch(
        f"/api/v1/mcp-servers/{server['id']}", json={"headers": None}, headers=admin.headers
    )
    assert cleared.json()["has_headers"] is False
    for response in (created, listed, patched, cleared):
        assert TOKEN not in response.text
    assert (
        api.delete(f"/api/v1/mcp-servers/{server['id']}", headers=admin.headers).status_code == 204
    )
    assert api.get("/api/v1/mcp-servers", headers=admin.headers).json()["items"] == []


def test_headers_are_encrypted_and_decrypt_for_the_runner(api: TestClient, admin: ApiUser) -> None:
    sid = api.post(
        "/api/v1/mcp-servers",
        json={"name": "s", "url": "https://tools.public.test/mcp", "headers": {"X-Api-Key": TOKEN}},
        headers=admin.headers,
    ).json()["id"]
    app = api.app
    with app.state.db.session() as session:  # type: ignore[attr-defined]
        row = session.get(McpServer, sid)
        assert row is not None and TOKEN.encode() not in (row.headers_ciphertext or b"")
        conn = mcp_servers.connection(row, app.state.secrets)  # type: ignore[attr-defined]
    assert conn.headers == {"X-Api-Key": TOKEN}
    assert TOKEN not in repr(conn)


def test_users_are_refused(api: TestClient, admin: ApiUser) -> None:
    user = make_user(api, "alice")
    assert api.get("/api/v1/mcp-servers", headers=user.headers).status_code == 403
    response = api.post(
        "/api/v1/mcp-servers",
        json={"name": "x", "url": "https://tools.public.test/"},
        headers=user.headers,
    )
    assert response.status_code == 403


@pytest.mark.parametrize(
    "url",
    [
        "https://tools.inside.test/mcp",
        "http://tools.public.test/mcp",
        "https://127.0.0.1/mcp",
        "https://metadata.google.internal/",
    ],
)
def test_mcp_urls_obey_the_endpoint_policy(api: TestClient, admin: ApiUser, url: str) -> None:
    """PROF-4: the same policy covers MCP server URLs."""
    response = api.post(
        "/api/v1/mcp-servers", json={"name": "x", "url": url}, headers=admin.headers
    )
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "endpoint_not_allowed"


def test_duplicate_names_conflict(api: TestClient, admin: ApiUser) -> None:
    body = {"name": "same", "url": "https://tools.public.test/mcp"}
    assert api.post("/api/v1/mcp-servers", json=body, headers=admin.headers).status_code == 201
    assert api.post("/api/v1/mcp-servers", json=body, headers=admin.headers).status_code == 409


def test_unknown_server_is_not_found(api: TestClient, admin: ApiUser) -> None:
    assert api.patch("/api/v1/mcp-servers/nope", json={}, headers=admin.headers).status_code == 404
    assert api.delete("/api/v1/mcp-servers/nope", headers=admin.headers).status_code == 404
