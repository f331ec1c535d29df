"""Real processes on loopback: ``chatmem serve`` and the fake model server as subprocesses.

Used by the kill tests (TURN-3), which SIGKILL the server, and by the turns benchmark, which
measures the server as it is deployed: its own process, the provider in another one.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
from tests.support.model_server import RemoteModelServer
from tests.support.ready import wait_ready

from chatmem.store import accounts
from chatmem.store.db import Database

ROOT = Path(__file__).resolve().parents[2]

# A deadline, not a wait: on a loaded 2-core machine `chatmem serve` has taken 20–40 s to start.
START_TIMEOUT = 90


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def stop_process(proc: subprocess.Popen[Any], timeout: float = 10) -> None:
    """Terminates a child process politely, and kills it if it does not exit in time."""
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:  # a wedged process
        proc.kill()
        proc.wait(5)


@contextmanager
def ready_process(*module_args: str) -> Iterator[str]:
    """``python -m MODULE_ARGS…`` in its own process, which prints ``READY <url>`` once it
    listens; yields that URL and kills the process afterwards."""
    proc = subprocess.Popen(
        [sys.executable, "-m", *module_args],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.startswith("READY "), line
    try:
        yield line.split()[1]
    finally:
        proc.kill()
        proc.wait(5)
        proc.stdout.close()


@contextmanager
def model_server_process() -> Iterator[RemoteModelServer]:
    """The fake model server in its own process, scripted over HTTP."""
    with ready_process("tests.support.model_server", "--port", "0") as url:
        yield RemoteModelServer(url)


class ServeProcess:
    """``chatmem serve`` as a subprocess on a fixed port and state directory (SQLite there
    unless ``env`` names another database).  ``module`` runs another entry point with the
    same arguments (``tests.support.offline``: no way off loopback)."""

    def __init__(self, state: Path, *, module: str = "chatmem", **env: str) -> None:
        self.state = state
        self.port = free_port()
        self.module = module
        self.extra_env = env
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def database_url(self) -> str:
        return (
            self.extra_env.get("CHATMEM_DATABASE_URL") or f"sqlite:///{self.state / 'chatmem.db'}"
        )

    def signed_in(self, name: str, *, admin: bool = False) -> httpx.Client:
        """A user created directly in the server's database, and an API client acting as
        them (Bearer token)."""
        db = Database(self.database_url)
        try:
            with db.session() as session:
                user = accounts.create_user(session, name, is_admin=admin)
                token = accounts.create_api_token(session, user, label="test")
        finally:
            db.dispose()
        return httpx.Client(
            base_url=self.url, headers={"Authorization": f"Bearer {token}"}, timeout=30
        )

    def start(self) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("CHATMEM_")}
        env.update(
            CHATMEM_STATE_DIR=str(self.state),
            CHATMEM_ALLOW_PRIVATE_ENDPOINTS="1",
            CHATMEM_LOG_LEVEL="WARNING",
            **self.extra_env,
        )
        self.proc = subprocess.Popen(
            [sys.executable, "-m", self.module, "serve", "--port", str(self.port)],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_ready(self.url + "/healthz", timeout=START_TIMEOUT, process=self.proc)

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is not None:
            stop_process(self.proc)


def fake_profile(api: httpx.Client, model_base_url: str) -> str:
    """A free model profile on the fake model server; returns its id."""
    response = api.post(
        "/api/v1/profiles",
        json={"name": "fake", "base_url": model_base_url, "model": "fake-model", "free": True},
    )
    assert response.status_code == 201, response.text
    return str(response.json()["id"])
