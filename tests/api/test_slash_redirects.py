"""SEC-3: a trailing-slash redirect's ``Location`` names no host, whatever ``Host`` the
client sent (Starlette's own built it from that header)."""

from __future__ import annotations

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from chatmem.web.slashes import install_slash_redirects

SQLITE = pytest.mark.parametrize("backend", ["sqlite"])
HOSTILE_HOST = {"host": "evil.example"}


@SQLITE
@pytest.mark.parametrize(
    ("path", "location"),
    [
        ("/api/v1/profiles/", "/api/v1/profiles"),
        ("/api/v1/profiles/?limit=5&q=a%20b", "/api/v1/profiles?limit=5&q=a%20b"),
        ("/api/v1/profiles///", "/api/v1/profiles"),
        ("/static", "/static/"),
        ("/profiles/", "/profiles"),
    ],
)
def test_the_redirect_is_relative_whatever_the_host_header(
    client: TestClient, path: str, location: str
) -> None:
    for method in ("GET", "POST"):
        response = client.request(method, path, headers=HOSTILE_HOST, follow_redirects=False)
        assert response.status_code == 307, (method, path)
        assert response.headers["location"] == location
    # Followed, it reaches the route on the server that was asked.
    assert client.get(path, headers=HOSTILE_HOST).status_code in (200, 401, 404)


@SQLITE
@pytest.mark.parametrize(
    "path", ["/nowhere/", "/nowhere", "/c/", "http://testserver//evil.example/"]
)
def test_a_path_no_route_takes_either_way_is_still_not_found(client: TestClient, path: str) -> None:
    response = client.get(path, headers=HOSTILE_HOST, follow_redirects=False)
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"
    assert "location" not in response.headers


def _catch_all_app() -> FastAPI:
    """An app with a route that also takes paths starting with ``//``."""
    app = FastAPI()

    @app.get("/{rest:path}/end")
    def end(rest: str) -> dict[str, str]:
        return {"rest": rest}

    @app.get("/plain/")
    def plain() -> dict[str, str]:
        return {"ok": "yes"}

    install_slash_redirects(app)
    return app


def test_a_redirect_is_never_to_a_path_a_browser_reads_as_a_host() -> None:
    with TestClient(_catch_all_app()) as client:
        # (A whole URL: httpx reads a bare "//evil.example/…" as a host.)
        for path in ("//evil.example/end/", "/%2Fevil.example/end/"):
            response = client.get("http://testserver" + path, follow_redirects=False)
            assert response.status_code == 404, path
            assert "location" not in response.headers
        # The route does take the other form: only the rule keeps it from a redirect.
        assert client.get("http://testserver//evil.example/end").json() == {"rest": "/evil.example"}
        # A backslash or other odd character in the path is encoded, never raw.
        odd = client.get("/%5Cevil.example/end/", follow_redirects=False)
        assert odd.status_code == 307 and odd.headers["location"] == "/%5Cevil.example/end"
        hash_sign = client.get("/a%23b%3F/end/?x=1", follow_redirects=False)
        assert hash_sign.headers["location"] == "/a%23b%3F/end?x=1"
        assert client.get("/plain", follow_redirects=False).headers["location"] == "/plain/"


def test_a_mounted_app_keeps_its_prefix() -> None:
    with TestClient(_catch_all_app(), root_path="/chat") as client:
        response = client.get("/chat/plain", follow_redirects=False)
        assert response.status_code == 307 and response.headers["location"] == "/chat/plain/"
