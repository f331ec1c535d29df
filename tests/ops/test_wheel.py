"""Issue 31 §1: the wheel alone, in a fresh virtualenv, serves — with no checkout on the path
and no settings: the state goes to the per-user data folder, the pages, their scripts,
translations and the migrations come from the wheel; a user signs in, a turn is answered and
``/metrics`` shows it.

The fresh venv gets the wheel with ``--no-deps`` and reaches its dependencies through a
``.pth`` line naming this venv's site-packages (nothing downloaded; the project itself is
not importable from there: the editable install's finder is a ``.pth`` that a plain path
line does not run)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import httpx
import pytest
from tests.support.model_server import FakeModelServer
from tests.support.ready import wait_ready
from tests.support.runs import finished_run
from tests.support.serve import ROOT, START_TIMEOUT, free_port, stop_process

pytestmark = pytest.mark.slow


def _run(*args: str, **kwargs: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, capture_output=True, text=True, timeout=600, **kwargs)  # type: ignore[call-overload, no-any-return]


def test_the_wheel_alone_serves(tmp_path: Path, model_server: FakeModelServer) -> None:
    # setuptools builds in the checkout's build/: a stale one would put old modules in the
    # wheel, and a new one must not stay behind.
    shutil.rmtree(ROOT / "build", ignore_errors=True)
    try:
        _check_the_wheel(tmp_path, model_server)
    finally:
        shutil.rmtree(ROOT / "build", ignore_errors=True)


def _check_the_wheel(tmp_path: Path, model_server: FakeModelServer) -> None:
    built = _run(
        sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
        "-w", str(tmp_path / "dist"), str(ROOT),
    )  # fmt: skip
    assert built.returncode == 0, built.stderr
    (wheel,) = (tmp_path / "dist").glob("chatmem-*.whl")
    fresh = tmp_path / "fresh"
    venv.create(fresh, with_pip=False)
    python = fresh / "bin" / "python"
    site = Path(
        _run(
            str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"
        ).stdout.strip()
    )
    (site / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    installed = _run(
        sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "-q",
        str(wheel),
    )  # fmt: skip
    assert installed.returncode == 0, installed.stderr
    where = _run(str(python), "-c", "import chatmem; print(chatmem.__file__)", cwd=tmp_path)
    assert where.stdout.startswith(str(site)), where

    home = tmp_path / "home"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CHATMEM_", "XDG_"))}
    env.update(HOME=str(home), XDG_DATA_HOME=str(home / "data"))
    chatmem = str(fresh / "bin" / "chatmem")
    version = _run(chatmem, "--version", env=env, cwd=tmp_path)
    assert re.fullmatch(r"chatmem \d+\.\d+\.\d+\n", version.stdout), version
    added = _run(
        chatmem, "user", "add", "ada", "--admin", "--password-stdin",
        input="correct horse battery\n", env=env, cwd=tmp_path,
    )  # fmt: skip
    assert added.returncode == 0, added.stderr
    state = home / "data" / "chatmem"
    assert (state / "chatmem.db").is_file()

    port = free_port()
    log = tmp_path / "serve.log"
    with log.open("w") as out:
        proc = subprocess.Popen(
            [chatmem, "serve", "--port", str(port)],
            env={**env, "CHATMEM_ALLOW_PRIVATE_ENDPOINTS": "1"},
            cwd=tmp_path,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_ready(url + "/readyz", timeout=START_TIMEOUT, process=proc, why=log.read_text)
        assert f"state in {state}" in log.read_text()
        _serve_a_turn(url, model_server)
    finally:
        stop_process(proc)


def _serve_a_turn(url: str, model_server: FakeModelServer) -> None:
    with httpx.Client(base_url=url, timeout=30) as web:
        signed = web.post(
            "/api/v1/auth/login", json={"name": "ada", "password": "correct horse battery"}
        )
        assert signed.status_code == 200, signed.text
        web.headers["X-CSRF-Token"] = signed.json()["csrf_token"]
        page = web.get("/", headers={"Accept-Language": "ru"})
        assert page.status_code == 200 and "Выйти" in page.text  # a translated template
        script = re.search(r'src="(/static/api\.js[^"]*)"', page.text)
        assert script and web.get(script.group(1)).status_code == 200
        profile = web.post(
            "/api/v1/profiles",
            json={"name": "fake", "base_url": model_server.base_url, "model": "m", "free": True},
        )
        assert profile.status_code == 201, profile.text
        cid = web.post(
            "/api/v1/conversations", json={"title": "t", "profile_id": profile.json()["id"]}
        ).json()["id"]
        model_server.reply("Hello from the wheel.")
        turn = web.post(f"/api/v1/conversations/{cid}/turns", json={"content": "Hi"})
        assert turn.status_code == 202, turn.text
        assert finished_run(web, turn.json()["run_id"])["status"] == "completed"
        scraped = web.get("/metrics")
        assert scraped.status_code == 200
        assert 'chatmem_turns_total{outcome="completed"} 1.0' in scraped.text
