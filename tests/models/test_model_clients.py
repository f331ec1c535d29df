"""The app's model clients: one connection pool per base URL (not per key), bounded, and a
pool pushed out is closed (issue 12)."""

from __future__ import annotations

from pathlib import Path

from chatmem.models.client import ModelEndpoint
from chatmem.models.clients import ModelClients
from chatmem.security.endpoints import EndpointPolicy
from chatmem.settings import Settings


async def test_one_pool_per_base_url_and_the_least_recent_is_closed(tmp_path: Path) -> None:
    settings = Settings(state_dir=tmp_path, allow_private_endpoints=True)
    clients = ModelClients(EndpointPolicy.from_settings(settings), settings, size=1)
    first = clients(ModelEndpoint("http://127.0.0.1:9/v1", "m", api_key="sk-one"))
    same_server = clients(ModelEndpoint("http://127.0.0.1:9/v1/", "other", api_key="sk-two"))
    assert first._shared is same_server._shared  # keyed by the URL, whatever the key
    assert len(clients) == 1
    other = clients(ModelEndpoint("http://127.0.0.1:10/v1", "m"))
    assert len(clients) == 1  # the bound: the first pool was pushed out ...
    assert first._shared._closing is not None
    await first._shared._closing
    assert first._shared.http.is_closed  # ... and closed, nothing being in flight
    await clients.aclose()
    assert other._shared.http.is_closed
