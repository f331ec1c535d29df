"""PROF-2, PROF-3: AES-GCM secrets bound to their row, the key file, the env key, rotation."""

from __future__ import annotations

import base64
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from tests.support.app import make_user
from tests.support.model_server import FakeModelServer

from chatmem.errors import ConfigurationError, SecretUnreadable
from chatmem.models.rotation import rotate
from chatmem.security.endpoints import EndpointPolicy
from chatmem.security.secret_box import (
    FORMAT_VERSION,
    KEY_FILE_NAME,
    SecretBox,
    decode_env_key,
    encode_key,
    load_key,
    new_key,
    profile_aad,
)
from chatmem.settings import Settings
from chatmem.store.db import Database
from chatmem.store.tables.profiles import McpServer, ModelProfile
from chatmem.web.app import create_app

SECRET = "sk-proj-SUPER-SECRET-abcdef0123456789"


def test_round_trip_and_format() -> None:
    box = SecretBox(new_key())
    blob = box.encrypt(SECRET, profile_aad("p1"))
    assert blob[0] == FORMAT_VERSION and blob[1:9] == box.key_id
    assert SECRET.encode() not in blob
    assert box.decrypt(blob, profile_aad("p1")) == SECRET
    assert box.encrypt(SECRET, profile_aad("p1")) != blob  # fresh nonce every time


def test_ciphertext_moved_to_another_row_fails_to_decrypt() -> None:
    """PROF-2: associated data binds a ciphertext to its profile."""
    box = SecretBox(new_key())
    blob = box.encrypt(SECRET, profile_aad("p1"))
    with pytest.raises(SecretUnreadable, match="does not belong"):
        box.decrypt(blob, profile_aad("p2"))


def test_wrong_key_and_damage_are_reported_plainly() -> None:
    box = SecretBox(new_key())
    blob = box.encrypt(SECRET, "a")
    with pytest.raises(SecretUnreadable, match="another key"):
        SecretBox(new_key()).decrypt(blob, "a")
    damaged = blob[:-1] + bytes([blob[-1] ^ 1])
    with pytest.raises(SecretUnreadable):
        box.decrypt(damaged, "a")
    with pytest.raises(SecretUnreadable, match="format"):
        box.decrypt(b"\x09" + blob[1:], "a")


def test_first_start_creates_a_0600_key_file_and_reuses_it(tmp_path: Path) -> None:
    """PROF-3: 32 random bytes, mode 0600 from creation."""
    old_umask = os.umask(0)  # even a permissive umask must not widen the mode
    try:
        box = load_key(tmp_path / "state", None)
    finally:
        os.umask(old_umask)
    path = tmp_path / "state" / KEY_FILE_NAME
    assert box.path == path and box.source == "file"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert len(path.read_bytes()) == 32
    assert load_key(tmp_path / "state", None).key == box.key


def test_damaged_key_file_refuses(tmp_path: Path) -> None:
    (tmp_path / KEY_FILE_NAME).write_bytes(b"short")
    with pytest.raises(ConfigurationError, match="32 bytes"):
        load_key(tmp_path, None)


def test_env_key_wins_and_no_file_is_written(tmp_path: Path) -> None:
    key = new_key()
    box = load_key(tmp_path, encode_key(key))
    assert box.key == key and box.source == "env"
    assert not (tmp_path / KEY_FILE_NAME).exists()
    assert decode_env_key(encode_key(key).rstrip("=")) == key  # padding optional


@pytest.mark.parametrize(
    "value",
    [
        "not base64 at all!",
        base64.urlsafe_b64encode(os.urandom(16)).decode(),  # too short
        base64.urlsafe_b64encode(os.urandom(33)).decode(),  # too long
        base64.b64encode(b"\xfb" * 32).decode(),  # standard, not URL-safe, alphabet
        "   ",
    ],
)
def test_malformed_env_key_refuses_to_start(value: str, tmp_path: Path) -> None:
    """PROF-3: the app is not built on a malformed CHATMEM_ENCRYPTION_KEY."""
    with pytest.raises(ConfigurationError, match="CHATMEM_ENCRYPTION_KEY"):
        create_app(Settings(state_dir=tmp_path, encryption_key=value))


def test_serve_with_a_malformed_env_key_exits_with_a_clear_line(tmp_path: Path) -> None:
    env = {**os.environ, "CHATMEM_STATE_DIR": str(tmp_path), "CHATMEM_ENCRYPTION_KEY": "nope"}
    result = subprocess.run(
        [sys.executable, "-m", "chatmem", "serve", "--port", "0"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1
    assert "CHATMEM_ENCRYPTION_KEY" in result.stderr
    assert "Traceback" not in result.stderr


# --- rotation ------------------------------------------------------------------------------------


def _db_with_secrets(tmp_path: Path, box: SecretBox) -> Database:
    db = Database(f"sqlite:///{tmp_path / 'rot.db'}")
    db.migrate()
    with db.session() as session:
        for pid in ("p1", "p2"):
            session.add(
                ModelProfile(
                    id=pid,
                    name=pid,
                    base_url="https://x.test/v1",
                    model="m",
                    api_key_ciphertext=box.encrypt(f"{SECRET}-{pid}", profile_aad(pid)),
                )
            )
        session.add(ModelProfile(id="p3", name="nokey", base_url="https://x.test/v1", model="m"))
        session.add(
            McpServer(
                id="s1",
                name="tools",
                url="https://t.test/mcp",
                headers_ciphertext=box.encrypt('{"Authorization": "Bearer t"}', "mcp_server:s1"),
            )
        )
    return db


def test_rotation_re_encrypts_everything_and_replaces_the_key_file(tmp_path: Path) -> None:
    """PROF-3: every stored key readable under the new key only; the file replaced, 0600."""
    old = load_key(tmp_path, None)
    db = _db_with_secrets(tmp_path, old)
    result = rotate(db, old)
    assert (result.profiles, result.mcp_servers) == (2, 1)
    new = load_key(tmp_path, None)
    assert new.key == result.new_box.key != old.key
    assert stat.S_IMODE((tmp_path / KEY_FILE_NAME).stat().st_mode) == 0o600
    assert not list(tmp_path.glob("*.next"))
    with db.session() as session:
        for pid in ("p1", "p2"):
            row = session.get(ModelProfile, pid)
            assert row is not None and row.api_key_ciphertext is not None
            assert new.decrypt(row.api_key_ciphertext, profile_aad(pid)) == f"{SECRET}-{pid}"
            with pytest.raises(SecretUnreadable):
                old.decrypt(row.api_key_ciphertext, profile_aad(pid))
        server = session.get(McpServer, "s1")
        assert server is not None and server.headers_ciphertext is not None
        assert "Bearer t" in new.decrypt(server.headers_ciphertext, "mcp_server:s1")
    db.dispose()


def test_rotation_is_all_or_nothing(tmp_path: Path) -> None:
    """A row that cannot be decrypted aborts the whole rotation: nothing changes."""
    old = load_key(tmp_path, None)
    db = _db_with_secrets(tmp_path, old)
    with db.session() as session:
        row = session.get(ModelProfile, "p2")
        assert row is not None
        row.api_key_ciphertext = old.encrypt("x", profile_aad("elsewhere"))  # moved ciphertext
        before = session.get(ModelProfile, "p1").api_key_ciphertext  # type: ignore[union-attr]
    with pytest.raises(SecretUnreadable):
        rotate(db, old)
    assert load_key(tmp_path, None).key == old.key
    assert not list(tmp_path.glob("*.next"))
    with db.session() as session:
        assert session.get(ModelProfile, "p1").api_key_ciphertext == before  # type: ignore[union-attr]
    db.dispose()


def test_keys_rotate_command_with_env_key_prints_the_new_key(tmp_path: Path) -> None:
    old_key = new_key()
    env = {
        **os.environ,
        "CHATMEM_STATE_DIR": str(tmp_path),
        "CHATMEM_ENCRYPTION_KEY": encode_key(old_key),
    }
    db = _db_with_secrets(tmp_path, SecretBox(old_key, source="env"))
    db.dispose()
    env["CHATMEM_DATABASE_URL"] = f"sqlite:///{tmp_path / 'rot.db'}"
    result = subprocess.run(
        [sys.executable, "-m", "chatmem", "keys", "rotate"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    printed = result.stdout.strip()
    new = SecretBox(decode_env_key(printed))
    assert "Re-encrypted 2 profile key(s)" in result.stderr
    db = Database(env["CHATMEM_DATABASE_URL"])
    with db.session() as session:
        row = session.get(ModelProfile, "p1")
        assert row is not None and row.api_key_ciphertext is not None
        assert new.decrypt(row.api_key_ciphertext, profile_aad("p1")) == f"{SECRET}-p1"
    db.dispose()


# --- the key never leaks ---------------------------------------------------------------------------


@pytest.mark.parametrize("backend", ["sqlite"])  # the state-file scan needs file-backed state
def test_key_never_in_responses_logs_database_or_state_files(
    settings: Settings,
    model_server: FakeModelServer,
    caplog: pytest.LogCaptureFixture,
    backend: str,
) -> None:
    """PROF-2: through a profile create, a list, a connection test and a chat request, with
    logging at DEBUG, the key appears only in the Authorization header sent to the model."""
    import logging

    import anyio

    from chatmem.models.client import ModelClient
    from chatmem.models.profiles import model_endpoint
    from chatmem.store.profiles import profile_by_id

    caplog.set_level(logging.DEBUG)
    app = create_app(settings.model_copy(update={"allow_private_endpoints": True}))
    texts: list[str] = []
    with TestClient(app) as api:
        alice = make_user(api, "alice")
        created = api.post(
            "/api/v1/profiles",
            json={
                "name": "m",
                "base_url": model_server.base_url,
                "model": "fake-model",
                "api_key": SECRET,
            },
            headers=alice.headers,
        )
        texts += [created.text]
        pid = created.json()["id"]
        texts += [api.get("/api/v1/profiles", headers=alice.headers).text]
        texts += [api.get(f"/api/v1/profiles/{pid}", headers=alice.headers).text]
        texts += [api.post(f"/api/v1/profiles/{pid}/test", headers=alice.headers).text]
        texts += [api.get("/openapi.json").text]
        with app.state.db.session() as session:
            endpoint = model_endpoint(profile_by_id(session, pid), app.state.secrets)

        async def chat() -> str:
            async with ModelClient(endpoint, EndpointPolicy(allow_private=True)) as client:
                return (await client.complete([{"role": "user", "content": "hi"}])).text

        assert anyio.run(chat)
    assert all(SECRET not in text for text in texts)
    assert SECRET not in caplog.text
    assert all(SECRET not in r.getMessage() for r in caplog.records)
    for path in settings.state_dir.rglob("*"):
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path
    sent = [r.headers.get("authorization") for r in model_server.requests]
    assert sent and all(h == f"Bearer {SECRET}" for h in sent)
    assert all(SECRET not in str(r.body) for r in model_server.requests)
