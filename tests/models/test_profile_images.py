"""PROJ-2 / PROV-4: a profile says whether its model takes image input (``accepts_images``,
false by default).  Stored and shown; images are not sent to any model yet (the placeholder
stands in), so the flag changes no plan."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient
from tests.support.app import make_user

from chatmem.security.endpoints import EndpointPolicy, StaticResolver
from chatmem.settings import Settings
from chatmem.web.app import create_app

PUBLIC = StaticResolver({"api.model.test": ["93.184.216.34"]})


@pytest.fixture
def api(settings: Settings) -> Iterator[TestClient]:
    app = create_app(settings)
    app.state.endpoint_policy = EndpointPolicy(resolver=PUBLIC)
    with TestClient(app) as client:
        yield client


def test_accepts_images_defaults_to_false_and_can_be_set(api: TestClient) -> None:
    alice = make_user(api, "alice")
    body = {"name": "Vision", "base_url": "https://api.model.test/v1", "model": "gpt-4o"}
    created = api.post("/api/v1/profiles", json=body, headers=alice.headers)
    assert created.status_code == 201, created.text
    profile = created.json()
    assert profile["accepts_images"] is False
    changed = api.patch(
        f"/api/v1/profiles/{profile['id']}", json={"accepts_images": True}, headers=alice.headers
    )
    assert changed.status_code == 200, changed.text
    assert changed.json()["accepts_images"] is True
    read = api.get(f"/api/v1/profiles/{profile['id']}", headers=alice.headers).json()
    assert read["accepts_images"] is True
    other = api.post(
        "/api/v1/profiles",
        json={**body, "name": "Text", "accepts_images": True},
        headers=alice.headers,
    )
    assert other.json()["accepts_images"] is True
    refused = api.patch(
        f"/api/v1/profiles/{profile['id']}",
        json={"accepts_images": "yes please"},
        headers=alice.headers,
    )
    assert refused.status_code in (400, 422)
