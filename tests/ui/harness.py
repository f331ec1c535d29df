"""A real ``chatmem serve`` in a subprocess, driven by real Chromium, for the UI tests.

One server and one browser per test module (starting them is the slow part); each test gets
a fresh browser context (own cookies) signed in through the sign-in page, and fails if the
page logged a console error.  Setup data goes through the public HTTP API (signed in like a
browser: session cookie plus CSRF header) — the same API the UI uses — so the tests depend
only on the CONTRACT.
"""

from __future__ import annotations

import contextlib
import os
import re
import socket
import struct
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from axe_playwright_python.sync_playwright import Axe
from tests.support.ready import wait_ready

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-quic",
    "--no-first-run",
]
ARTIFACTS = Path(__file__).resolve().parents[1] / "_artifacts"
DOCS_SCREENSHOTS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"
PASSWORD = "correct horse battery staple"

# A deadline, not a wait: on a loaded 2-core machine `chatmem serve` has taken 20–40 s to start.
START_TIMEOUT = 90


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _chatmem(env: dict[str, str], *args: str, stdin: str = "") -> str:
    done = subprocess.run(
        [sys.executable, "-m", "chatmem", *args],
        input=stdin,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"chatmem {' '.join(args)} failed: {done.stderr.strip()}")
    return done.stdout


@dataclass
class Server:
    """A running ``chatmem serve``: its URL, the first-run link it printed, an API client."""

    url: str
    env: dict[str, str]
    process: subprocess.Popen[str]
    log_path: Path
    signin_link: str | None = None
    sessions: dict[str, dict[str, str]] = field(default_factory=dict)

    def add_user(self, name: str, *, admin: bool = False) -> None:
        _chatmem(
            self.env,
            "user",
            "add",
            name,
            "--password-stdin",
            *(["--admin"] if admin else []),
            stdin=PASSWORD + "\n",
        )
        # Setup calls use a browser-style session (cookie + CSRF header), signed in through
        # the API: one process start less per module than ``chatmem token create``.
        response = httpx.post(
            self.url + "/api/v1/auth/login", json={"name": name, "password": PASSWORD}, timeout=30
        )
        response.raise_for_status()
        self.sessions[name] = dict(response.cookies)

    def api(self, name: str) -> httpx.Client:
        """An HTTP client for the public API, signed in as ``name``."""
        cookies = self.sessions[name]
        return httpx.Client(
            base_url=self.url,
            cookies=cookies,
            headers={"X-CSRF-Token": cookies["chatmem_csrf"]},
            timeout=30,
        )

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:  # pragma: no cover - a wedged server
            self.process.kill()
            self.process.wait(timeout=5)


def start_server(state_dir: Path, **extra_env: str) -> Server:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHATMEM_")}
    env.update(
        CHATMEM_STATE_DIR=str(state_dir),
        CHATMEM_ALLOW_PRIVATE_ENDPOINTS="1",
        CHATMEM_HOST="127.0.0.1",
        CHATMEM_PORT=str(port),
        **extra_env,
    )
    state_dir.mkdir(parents=True, exist_ok=True)
    log_path = state_dir / "server.log"
    log = log_path.open("w")
    process = subprocess.Popen(
        [sys.executable, "-m", "chatmem", "serve"],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        text=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_ready(url + "/healthz", timeout=START_TIMEOUT, process=process, why=log_path.read_text)
    except AssertionError:
        process.kill()
        raise
    match = re.search(r"http://\S+/auth/link/\S+", log_path.read_text())
    return Server(url, env, process, log_path, signin_link=match.group(0) if match else None)


def json_items(body: Any) -> list[dict[str, Any]]:
    if isinstance(body, list):
        return body
    return list(body.get("items", []))


class ConsoleErrors:
    """Collects console errors and uncaught exceptions of a page."""

    def __init__(self) -> None:
        self.errors: list[str] = []
        self.allowed: list[str] = []

    def allow(self, pattern: str) -> None:
        """Expected errors (e.g. the browser logging a deliberate 4xx response)."""
        self.allowed.append(pattern)

    def attach(self, page: Any) -> None:
        page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: self.errors.append(f"uncaught: {e}"))
        # "Failed to load resource" does not name the URL: record failed responses beside it.
        page.on(
            "response",
            lambda r: (
                self.errors.append(f"HTTP {r.status} {r.request.method} {r.url}")
                if r.status >= 400
                else None
            ),
        )

    def unexpected(self) -> list[str]:
        """Errors not allowed; a failed load counts once, through its ``HTTP …`` line."""
        return [
            e
            for e in self.errors
            if not e.startswith("Failed to load resource")
            and not any(re.search(p, e) for p in self.allowed)
        ]


@contextlib.contextmanager
def opened_page(
    browser: Any, console: ConsoleErrors, session: Any = None, **options: Any
) -> Iterator[Any]:
    """A new browser context and its page (1280×860 unless ``options`` give a viewport;
    ``session``: a signed-in storage state); the test fails on console errors."""
    options.setdefault("viewport", {"width": 1280, "height": 860})
    context = browser.new_context(storage_state=session, **options)
    context.set_default_timeout(10_000)
    page = context.new_page()
    console.attach(page)
    try:
        yield page
    finally:
        context.close()
    assert console.unexpected() == [], "console errors in the page"


def iter_lines(text: str) -> Iterator[str]:
    yield from (line for line in text.splitlines() if line.strip())


def make_profile(
    api: httpx.Client, base_url: str, name: str = "Fake model", **fields: Any
) -> dict[str, Any]:
    """A model profile pointing at the fake model server."""
    body = {
        "name": name,
        "base_url": base_url,
        "model": "fake-model",
        "api_key": "sk-test-123",
        **fields,
    }
    response = api.post("/api/v1/profiles", json=body)
    assert response.status_code == 201, response.text
    return dict(response.json())


def make_conversation(
    api: httpx.Client, profile_id: str, pairs: int = 0, title: str = "Talk", **fields: Any
) -> dict[str, Any]:
    """A conversation with ``pairs`` stored question–answer pairs (no model involved)."""
    c = api.post("/api/v1/conversations", json={"title": title, "profile_id": profile_id, **fields})
    assert c.status_code == 201, c.text
    conversation = dict(c.json())
    for i in range(pairs):
        for role, text in (
            ("user", f"Question {i}: tell me about topic {i}."),
            ("assistant", f"Answer {i}: topic {i} is interesting."),
        ):
            r = api.post(
                f"/api/v1/conversations/{conversation['id']}/messages",
                json={"role": role, "content": text},
            )
            assert r.status_code == 201, r.text
    return conversation


def save_screenshot(page: Any, name: str, *, readme: bool = False) -> None:
    """Save ``tests/_artifacts/NAME``; README copies in ``docs/screenshots/`` are refreshed
    only with ``UPDATE_SCREENSHOTS=1`` so a test run never dirties the checkout."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / name))
    if readme and os.environ.get("UPDATE_SCREENSHOTS") == "1":
        DOCS_SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(DOCS_SCREENSHOTS / name))


class CuttableProxy:
    """A loopback TCP proxy whose open connections can be cut at once — a real dropped
    connection, which the browser's offline emulation does not give for an open stream."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self._listener.getsockname()[1])
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.target_port))
            with self._lock:
                self._sockets += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            with contextlib.suppress(OSError):
                sink.shutdown(socket.SHUT_WR)

    def cut(self) -> None:
        """Reset every open connection; new ones are still accepted."""
        with self._lock:
            sockets, self._sockets = self._sockets, []
        for s in sockets:
            with contextlib.suppress(OSError):
                # shutdown() wakes the pipe threads blocked in recv(); close() alone does not.
                s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                s.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                s.close()

    def close(self) -> None:
        self._closed = True
        self._listener.close()
        self.cut()


def open_chat(page: Any, server: Server, conversation: dict[str, Any]) -> None:
    """Open a conversation and wait until its title and counter are shown."""
    from playwright.sync_api import expect

    page.goto(server.url + "/c/" + conversation["id"])
    expect(page.locator("#chat-title")).to_have_text(conversation["title"])
    expect(page.locator("#counter-text")).not_to_have_text("–")


def tab_to(page: Any, target: Any, limit: int = 120) -> None:
    """Press Tab until ``target`` has the focus (at most ``limit`` times)."""
    for _ in range(limit):
        if target.evaluate("node => node === document.activeElement"):
            return
        page.keyboard.press("Tab")
    raise AssertionError("Tab never reached the element")


#: The page's colour scheme and the user's theme setting, each against the other: the
#: system's light and dark with no choice, then each choice against the system's opposite.
THEME_CASES = [("light", "system"), ("dark", "system"), ("light", "dark"), ("dark", "light")]
THEME_IDS = ["system-light", "system-dark", "chosen-dark", "chosen-light"]

#: The axe impacts a page must never have; ``axe_violations(page, None)`` reports every one.
SEVERE = ("serious", "critical")


def axe_violations(page: Any, impacts: tuple[str, ...] | None = SEVERE) -> list[str]:
    """axe-core's violations on the page as it is (``impacts``: only those), one line each
    with up to five of the elements it found."""
    result = Axe().run(page, options={"resultTypes": ["violations"]})
    return [
        f"{v['impact']} {v['id']}: {[n['target'] for n in v['nodes']][:5]}"
        for v in result.response["violations"]
        if impacts is None or v["impact"] in impacts
    ]
