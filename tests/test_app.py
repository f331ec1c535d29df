"""The app factory and the CLI shell: what every other room builds on."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from chatmem.cli import main
from chatmem.settings import Settings
from chatmem.web.app import create_app


def test_healthz_needs_no_auth(tmp_path: Path) -> None:
    with TestClient(create_app(Settings(state_dir=tmp_path / "s"))) as client:
        response = client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


def test_openapi_describes_the_api(tmp_path: Path) -> None:
    with TestClient(create_app(Settings(state_dir=tmp_path / "s"))) as client:
        spec = client.get("/openapi.json").json()
    assert spec["info"]["title"] == "chatmem"


def test_unknown_path_answers_the_contract_error_shape(tmp_path: Path) -> None:
    with TestClient(create_app(Settings(state_dir=tmp_path / "s"))) as client:
        response = client.get("/api/v1/no-such-thing")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"


def test_settings_read_chatmem_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CHATMEM_PORT", "9123")
    monkeypatch.setenv("CHATMEM_ALLOW_PRIVATE_ENDPOINTS", "1")
    settings = Settings()
    assert settings.port == 9123
    assert settings.allow_private_endpoints is True


def test_cli_usage_error_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["no-such-command"])
    assert exc.value.code == 2
    assert "Traceback" not in capsys.readouterr().err


def test_error_data_never_changes_the_http_status(tmp_path: Path) -> None:
    """A provider error carrying the provider's own status (e.g. 400) is still our 502."""
    from fastapi import FastAPI

    from chatmem.errors import ProviderError
    from chatmem.web.errors import install_error_handlers

    app = FastAPI()
    install_error_handlers(app)

    @app.get("/boom")
    def boom() -> None:
        raise ProviderError("The model API answered 400: bad", status=400, code="x")

    with TestClient(app) as client:
        response = client.get("/boom")
    assert response.status_code == 502
    assert response.json()["error"]["code"] == "provider_error"
    assert response.json()["error"]["status"] == 400
