"""SEC-3: pages and API answers carry a strict CSP and the other hardening headers, ``next``
after sign-in stays on the site, and the state directory is private (0700, files 0600).

The browser side (no CSP violation on any page, ``signin.js`` refusing a hostile ``next``)
is in ``tests/ui/test_hardening.py``."""

from __future__ import annotations

import html
import logging
import os
import re
import stat
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from tests.support.app import make_user

from chatmem.settings import Settings
from chatmem.web.app import create_app
from chatmem.web.security import CONTENT_SECURITY_POLICY, safe_next_path

SQLITE = pytest.mark.parametrize("backend", ["sqlite"])
TEMPLATES = Path(__file__).resolve().parents[2] / "src" / "chatmem" / "web" / "templates"


def _csp(response: object) -> dict[str, str]:
    header = response.headers["content-security-policy"]  # type: ignore[attr-defined]
    return {
        part.strip().split(" ", 1)[0]: part.strip().partition(" ")[2]
        for part in header.split(";")
        if part.strip()
    }


@SQLITE
@pytest.mark.parametrize(
    "path", ["/", "/signin", "/profiles", "/api/v1/me", "/healthz", "/static/app.css", "/nowhere"]
)
def test_every_answer_carries_the_hardening_headers(client: TestClient, path: str) -> None:
    response = client.get(path, follow_redirects=False)
    csp = _csp(response)
    assert csp["script-src"] == "'self'" and csp["style-src"] == "'self'"
    assert csp["default-src"] == "'self'" and csp["object-src"] == "'none'"
    assert csp["frame-ancestors"] == "'none'" and csp["base-uri"] == "'none'"
    assert "unsafe-inline" not in response.headers["content-security-policy"]
    assert "unsafe-eval" not in response.headers["content-security-policy"]
    assert response.headers["x-frame-options"] == "DENY"
    assert response.headers["x-content-type-options"] == "nosniff"
    assert response.headers["referrer-policy"] == "same-origin"
    assert "strict-transport-security" not in response.headers  # plain http here


@SQLITE
def test_hsts_is_sent_when_cookies_are_secure(settings: Settings) -> None:
    with TestClient(create_app(settings.model_copy(update={"secure_cookies": True}))) as client:
        response = client.get("/healthz")
    assert response.headers["strict-transport-security"].startswith("max-age=")


@SQLITE
def test_the_api_docs_page_is_served_from_this_site_alone(client: TestClient) -> None:
    """Swagger UI used to come from a CDN, a floating ``@5`` without integrity, with a policy
    allowing any script from that host."""
    response = client.get("/api/docs")
    assert response.status_code == 200
    assert not re.search(r"(?:[a-z][a-z0-9+.-]*:)?//", response.text, re.I), response.text
    assert not re.search(r"<script(?![^>]*\bsrc=)", response.text)  # nothing inline
    assert response.headers["content-security-policy"] == CONTENT_SECURITY_POLICY
    sources = {word for value in _csp(response).values() for word in value.split()}
    assert sources <= {"'self'", "'none'", "data:", "blob:"}, sources
    assets = re.findall(r'(?:src|href)="([^"]+)"', response.text)
    assert any("swagger-ui-bundle" in a for a in assets) and any(".css" in a for a in assets)
    for asset in assets:
        assert client.get(asset).status_code == 200, asset
    openapi = re.search(r'data-openapi-url="([^"]+)"', response.text)
    assert openapi and client.get(html.unescape(openapi.group(1))).json()["paths"]


def test_templates_hold_no_inline_script_style_or_handler() -> None:
    for template in TEMPLATES.glob("*.html"):
        text = template.read_text(encoding="utf-8")
        # A script element either loads a file or carries data the browser never runs
        # (``type="application/json"``: the language catalog, escaped by Language.js_catalog).
        assert not re.search(r'<script(?![^>]*\b(?:src=|type="application/json"))', text), (
            template.name
        )
        assert not re.search(r"<style\b", text), template.name
        assert not re.search(r"\sstyle\s*=", text), template.name
        assert not re.search(r"\son[a-z]+\s*=", text), template.name


HOSTILE_NEXT = [
    "/\\evil.example/x",
    "/%5Cevil.example/x",  # sent encoded, read decoded
    "//evil.example/x",
    "/\t/evil.example",
    "/%09/evil.example",
    "/%0a/evil.example",
    "/%0d/evil.example",
    "/ /evil.example",
    "/\x00/evil.example",
    "/\x7f/evil.example",
    "https://evil.example/",
    "javascript:alert(1)",
    "evil.example/x",
    "\\\\evil.example",
    "/x\\..\\..\\evil",
    "/" + "a" * 3000,
    # Normalised by a browser to "//evil.example…" (dot segments, also percent-encoded ones).
    "/.//evil.example/steal",
    "/x/..//evil.example",
    "/%2e//evil.example",  # sent as is: read as "/.//evil.example"
    "/%252e//evil.example",  # read as "/%2e//evil.example"
    "/%252F/evil.example",  # read as "/%2F/evil.example", "//evil.example" once decoded
]


@SQLITE
@pytest.mark.parametrize("hostile", HOSTILE_NEXT)
def test_next_is_only_ever_a_path_on_this_site(client: TestClient, hostile: str) -> None:
    for page in ("/", "/signin"):
        response = client.get(page, params={"next": hostile} if "%" not in hostile else None)
        if "%" in hostile:
            response = client.get(f"{page}?next={hostile}")
        match = re.search(r'data-next="([^"]*)"', response.text)
        assert match, response.text[:300]
        assert html.unescape(match.group(1)) == "/", hostile


@SQLITE
def test_a_signed_in_visit_with_a_hostile_next_stays_home(client: TestClient) -> None:
    make_user(client, "carol", password="pw")
    assert client.post("/api/v1/auth/login", json={"name": "carol", "password": "pw"}).is_success
    for hostile in (
        "/\\evil.example/x",
        "//evil.example",
        "/%09/evil.example",
        "/.//evil.example/steal",
        "/%252e//evil.example",
    ):
        response = client.get(f"/?next={hostile}", follow_redirects=False)
        assert response.status_code == 200, hostile  # the chat page, no redirect at all
    kept = client.get("/?next=/profiles%3Fx%3D1", follow_redirects=False)
    assert kept.status_code == 303 and kept.headers["location"] == "/profiles?x=1"


@pytest.mark.parametrize(
    "path", ["/", "/profiles", "/c/abc123", "/archive/x?y=1#z", "/a%20b", "/signin?next=%2F"]
)
def test_same_site_paths_are_kept(path: str) -> None:
    assert safe_next_path(path) == path


# --- the state directory ------------------------------------------------------------------


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@SQLITE
def test_the_state_directory_is_0700_and_every_file_0600(settings: Settings) -> None:
    state = settings.state_dir
    assert not state.exists()
    old = os.umask(0o022)  # the usual umask: what chatmem creates must not depend on it
    try:
        with TestClient(create_app(settings)) as client:
            user = make_user(client, "carol")
            cid = client.post(
                "/api/v1/conversations", json={"title": "t"}, headers=user.headers
            ).json()["id"]
            client.post(
                f"/api/v1/conversations/{cid}/archive", headers=user.headers
            ).raise_for_status()
            files = {p.name: _mode(p) for p in state.rglob("*") if p.is_file()}
            dirs = {str(p.relative_to(state)): _mode(p) for p in state.rglob("*") if p.is_dir()}
    finally:
        os.umask(old)
    assert _mode(state) == 0o700
    for name in ("chatmem.db", "chatmem.db-wal", "chatmem.db-shm", "secret.key"):
        assert files.get(name) == 0o600, (name, files)
    archives = [name for name in files if name.endswith(".json.zst")]
    assert archives, files
    assert set(files.values()) == {0o600}, files
    assert dirs and set(dirs.values()) == {0o700}, dirs


@SQLITE
def test_a_state_directory_readable_by_others_is_reported_at_start(
    settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    state = settings.state_dir
    state.mkdir(mode=0o755)
    os.chmod(state, 0o755)
    (state / "notes.txt").write_text("x")
    os.chmod(state / "notes.txt", 0o644)
    caplog.set_level(logging.WARNING)
    with TestClient(create_app(settings)):
        pass
    warning = "\n".join(r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING)
    assert "readable by other local users" in warning
    assert str(state) in warning and "notes.txt (0644)" in warning and "(0755)" in warning
    assert "chmod -R go-rwx" in warning
    # Nothing is changed behind the operator's back.
    assert _mode(state) == 0o755

    caplog.clear()
    os.chmod(state, 0o700)
    os.chmod(state / "notes.txt", 0o600)
    with TestClient(create_app(settings)):
        pass
    assert "readable by other local users" not in caplog.text


def test_the_language_catalog_cannot_close_its_script_element() -> None:
    import json
    from gettext import NullTranslations

    from chatmem.web.i18n import Language

    hostile = "</script><script>alert(1)</script>"
    block = Language("en", NullTranslations(), {"Send": hostile}).js_catalog
    assert "</" not in block and "<script" not in block
    assert json.loads(block)["messages"]["Send"] == hostile
