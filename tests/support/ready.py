"""Waiting for a process the tests started to serve: poll its readiness URL until it answers
200.  A process's start sends no event to wait on, so this is a probe at an interval (not a
wait for an outcome); it gives up when the process exits or the deadline passes, saying why
with what ``why()`` returns (the process's log)."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable

import httpx

PROBE_INTERVAL = 0.1


def wait_ready(
    url: str,
    *,
    timeout: float,
    process: subprocess.Popen[bytes] | subprocess.Popen[str] | None = None,
    client: httpx.Client | None = None,
    why: Callable[[], str] = lambda: "",
) -> None:
    """Return once ``GET url`` answers 200; raise ``AssertionError`` with ``why()`` if
    ``process`` exits first or ``timeout`` seconds pass."""
    get = client.get if client is not None else (lambda u: httpx.get(u, timeout=1))
    deadline = time.monotonic() + timeout
    while True:
        if process is not None and process.poll() is not None:
            raise AssertionError(
                f"exited with {process.returncode} before {url} was ready\n{why()}"
            )
        try:
            if get(url).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            raise AssertionError(f"{url} was not ready within {timeout} s\n{why()}")
        time.sleep(PROBE_INTERVAL)
