"""The files of ``deploy/`` agree with chatmem and with each other (OPS-4).

What a team copies must stay true as chatmem changes: the environment file lists every
setting with its current help text and default (it is generated: ``scripts/deploy_env.py``),
its values are valid settings, the unit writes where the file puts the state, and the nginx
site's bounds and timeouts are chatmem's.  ``test_nginx_replicas.py`` runs them.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import ModuleType

import pytest
import uvicorn
from tests.support.deployment import ENV_FILE, SITE, env_values

from chatmem.errors import ConfigurationError
from chatmem.settings import Settings
from chatmem.web.app import create_app
from chatmem.web.sse import KEEPALIVE_SECONDS

ROOT = Path(__file__).resolve().parents[2]
UNIT = ROOT / "deploy" / "systemd" / "chatmem.service"
SIZES = {"k": 1024, "m": 1024**2, "g": 1024**3}


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("deploy_env", ROOT / "scripts" / "deploy_env.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _unit() -> dict[str, list[str]]:
    entries: dict[str, list[str]] = {}
    for line in UNIT.read_text(encoding="utf-8").splitlines():
        if "=" in line and not line.startswith(("#", "[")):
            key, value = line.split("=", 1)
            entries.setdefault(key, []).append(value)
    return entries


def _location(site: str, pattern: str) -> str:
    """The body of the ``location`` block whose first line matches ``pattern``."""
    match = re.search(r"^\s*location " + pattern + r" \{\n(.*?)^\s*\}", site, re.M | re.S)
    assert match is not None, pattern
    return match.group(1)


def _seconds(block: str, directive: str) -> float:
    match = re.search(rf"^\s*{directive} (\d+)s;", block, re.M)
    assert match is not None, directive
    return float(match.group(1))


def _bytes(block: str) -> int:
    match = re.search(r"^\s*client_max_body_size (\d+)([kmg]);", block, re.M)
    assert match is not None
    return int(match.group(1)) * SIZES[match.group(2)]


def test_the_env_file_is_what_the_generator_writes_OPS_4() -> None:
    assert ENV_FILE.read_text(encoding="utf-8") == _generator().render(), (
        "deploy/chatmem.env is out of date: python scripts/deploy_env.py --write"
    )


def test_the_env_file_lists_every_setting_with_its_help_and_default_OPS_4() -> None:
    text = ENV_FILE.read_text(encoding="utf-8")
    flat = " ".join(line.lstrip("# ") for line in text.splitlines())
    for name, field in Settings.model_fields.items():
        variable = "CHATMEM_" + name.upper()
        assert len(re.findall(rf"^#?{variable}=", text, re.M)) == 1, variable
        assert " ".join((field.description or "").split()) in " ".join(flat.split()), variable


def test_the_env_files_values_are_valid_settings_OPS_4() -> None:
    values = env_values(ENV_FILE.read_text(encoding="utf-8"))
    assert set(values) <= {"CHATMEM_" + name.upper() for name in Settings.model_fields}
    # The key is a placeholder on purpose: chatmem refuses to start until it is replaced.
    assert values["CHATMEM_ENCRYPTION_KEY"] == "CHANGE-ME"
    fields = {k.removeprefix("CHATMEM_").lower(): v for k, v in values.items()}
    settings = Settings.model_validate({**fields, "encryption_key": None})
    assert settings.redis_url and str(settings.database_url).startswith("postgresql://")
    assert settings.secure_cookies and settings.trusted_proxies
    with pytest.raises(ConfigurationError, match="CHATMEM_ENCRYPTION_KEY"):
        create_app(Settings.model_validate({**fields, "state_dir": "/nonexistent"}))


def test_the_unit_runs_chatmem_serve_where_the_env_file_puts_the_state_OPS_4() -> None:
    unit = _unit()
    values = env_values(ENV_FILE.read_text(encoding="utf-8"))
    program, *arguments = unit["ExecStart"][0].split()
    assert Path(program).name == "chatmem" and arguments == ["serve"]
    assert unit["EnvironmentFile"] == ["/etc/chatmem/chatmem.env"]
    assert values["CHATMEM_STATE_DIR"] == "/var/lib/" + unit["StateDirectory"][0]
    assert unit["User"] == ["chatmem"] and unit["NoNewPrivileges"] == ["yes"]
    assert unit["ProtectSystem"] == ["strict"] and unit["Restart"] == ["always"]


def test_the_nginx_sites_bounds_are_chatmems_OPS_4() -> None:
    site = SITE.read_text(encoding="utf-8")
    defaults = Settings()
    server = site[site.index("listen 443") :]
    assert _bytes(server.split("location", 1)[0]) == defaults.max_body_bytes
    assert _bytes(_location(site, "= /api/v1/import")) == defaults.max_import_bytes
    # A plain request may wait on one model call or one MCP App tool call.
    plain = _seconds(server.split("location", 1)[0], "proxy_read_timeout")
    assert plain > max(defaults.model_timeout, defaults.mcp_call_timeout)
    # nginx drops an idle connection to a replica before uvicorn does.
    idle = float(re.search(r"keepalive_timeout (\d+)s;", site).group(1))  # type: ignore[union-attr]
    assert idle < uvicorn.Config(app="chatmem").timeout_keep_alive


def test_the_nginx_site_streams_every_event_stream_of_chatmem_OPS_4() -> None:
    site = SITE.read_text(encoding="utf-8")
    streaming = re.findall(r"^\s*location ~ (\S+) \{", site, re.M)
    for pattern in streaming:
        block = _location(site, "~ " + re.escape(pattern))
        assert "proxy_buffering off;" in block and "gzip off;" in block, pattern
        assert _seconds(block, "proxy_read_timeout") > max(
            KEEPALIVE_SECONDS, Settings().tool_approval_timeout
        )
    paths = set(create_app(Settings()).openapi()["paths"])
    for path in [
        "/api/v1/runs/{run_id}/events",
        "/api/v1/conversations/{conversation_id}/turns",
        "/v1/chat/completions",
    ]:
        assert path in paths, path
        concrete = re.sub(r"\{[^}]+\}", "x1", path)
        assert any(re.fullmatch(p.strip("^$"), concrete) for p in streaming), path
