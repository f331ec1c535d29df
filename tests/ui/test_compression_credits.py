"""When "Compress now" cannot be paid for (seed 001): the memory window offers the ways out —
"Request extension" where the server takes requests (USE-3) and "Continue in a new chat" from
the summary (CTX-23)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import expect
from tests.support.model_server import FakeModelServer
from tests.support.runs import finished_run
from tests.ui.harness import Server, make_conversation, open_chat, start_server

pytestmark = pytest.mark.browser

LIMITS = {"CHATMEM_USAGE_SESSION_LIMIT": "0.00001", "CHATMEM_USAGE_WEEK_LIMIT": "1"}


@pytest.fixture(scope="module", params=["1", "0"], ids=["requests-on", "requests-off"])
def server(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[Server]:
    """Tiny included usage, with extension requests on or off."""
    state = tmp_path_factory.mktemp("ui-credits") / "state"
    srv = start_server(state, **LIMITS, CHATMEM_USAGE_EXTENSION_REQUESTS=request.param)
    srv.add_user("alice")
    try:
        yield srv
    finally:
        srv.stop()


def _summarised_then_exhausted(api: Any, model: FakeModelServer, profile_id: str) -> Any:
    """A chat with a summary and two pairs after it, once the included usage is used up."""
    c = make_conversation(api, profile_id, pairs=3, title="Out of credits")
    model.reply("Goal: talk. Key facts: topics 0 to 2.")
    body = api.post(f"/api/v1/conversations/{c['id']}/compact", json={}).json()
    if body.get("run_id"):
        finished_run(api, body["run_id"])
    # The summary's own price is already more than the tiny included usage.
    assert api.get("/api/v1/usage").json()["exhausted"] is True
    for role, text in (
        ("user", "One more question"),
        ("assistant", "One more answer"),
        ("user", "And another"),
        ("assistant", "And another answer"),
    ):
        r = api.post(
            f"/api/v1/conversations/{c['id']}/messages", json={"role": role, "content": text}
        )
        assert r.status_code == 201, r.text
    return c


def test_seed001_compression_without_credits_offers_an_extension_or_a_new_chat(
    alice: Any,
    server: Server,
    model: FakeModelServer,
    profiles: Any,
    console: Any,
    request: pytest.FixtureRequest,
) -> None:
    requests_on = "requests-on" in request.node.name
    console.allow("402")
    with server.api("alice") as api:
        c = _summarised_then_exhausted(api, model, profiles["paid"]["id"])
    open_chat(alice, server, c)
    alice.locator("#counter").click()
    dialog = alice.get_by_role("dialog", name="Conversation memory")
    dialog.get_by_role("button", name="Compress now", exact=False).click()
    expect(dialog.locator("#compress-result")).to_have_text(
        "Not enough credits to compress the memory"
    )
    ways = dialog.locator("#compress-ways")
    extension = ways.get_by_role("button", name="Request extension")
    more = ways.get_by_role("button", name="Continue in a new chat")
    expect(more).to_be_visible()
    if requests_on:
        expect(extension).to_be_visible()
        extension.click()
        expect(alice.locator(".toast").last).to_have_text("The administrators were notified")
    else:
        expect(extension).to_have_count(0)
    more.click()
    expect(dialog).to_be_hidden()
    expect(alice.locator(".compaction-marker")).to_contain_text(
        "This chat continues from the summary of an earlier chat"
    )
    with server.api("alice") as api:
        items = api.get("/api/v1/conversations").json()["items"]
        assert any(x.get("source_conversation_id") == c["id"] for x in items)
