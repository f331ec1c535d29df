"""Waiting for a turn to end on its own event stream, not by polling (TURN-6).

The run's events stream closes after its terminal event, and the run's row is written in the
same transaction as that event, so reading the stream to its end is the wait.
"""

from __future__ import annotations

from typing import Any


def finished_run(
    client: Any, run_id: str, headers: dict[str, str] | None = None, timeout: float = 60.0
) -> dict[str, Any]:
    """The run once it has ended.  ``client``: an httpx client or Starlette's TestClient."""
    with client.stream(
        "GET", f"/api/v1/runs/{run_id}/events", headers=headers or {}, timeout=timeout
    ) as response:
        assert response.status_code == 200, response.read()
        for _ in response.iter_lines():
            pass
    run = client.get(f"/api/v1/runs/{run_id}", headers=headers or {}).json()
    assert run["status"] != "running", run
    return dict(run)
