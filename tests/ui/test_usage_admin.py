"""The usage page and the admin console in the browser (USE-4, USE-5): reset times and
spending per model, an extension granted on the admin page and the user's ring dropping."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import expect
from tests.support.model_server import FakeModelServer
from tests.support.runs import finished_run
from tests.ui.conftest import _open_page, sign_in
from tests.ui.harness import (
    ConsoleErrors,
    Server,
    make_conversation,
    make_profile,
    open_chat,
    save_screenshot,
    start_server,
)

pytestmark = pytest.mark.browser

LIMITS = {"CHATMEM_USAGE_SESSION_LIMIT": "0.01", "CHATMEM_USAGE_WEEK_LIMIT": "5"}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, model: FakeModelServer) -> Iterator[Server]:
    """A small included usage; the fallback profile is known only after a first start."""
    state = tmp_path_factory.mktemp("ui-usage-admin") / "state"
    first = start_server(state, **LIMITS)
    try:
        first.add_user("alice")
        first.add_user("root", admin=True)
        with first.api("root") as api:
            base = make_profile(api, model.base_url, "Base", free=True, shared=True)
        with first.api("alice") as api:
            make_profile(
                api,
                model.base_url,
                "Premium",
                input_price_per_mtok=30.0,
                output_price_per_mtok=60.0,
            )
    finally:
        first.stop()
    srv = start_server(state, **LIMITS, CHATMEM_USAGE_FALLBACK_PROFILE_ID=base["id"])
    srv.sessions.update(first.sessions)
    try:
        yield srv
    finally:
        srv.stop()


def _spend(server: Server, model: FakeModelServer) -> None:
    """One Premium answer: 0.09 USD, above the 0.01 session limit."""
    with server.api("alice") as api:
        if api.get("/api/v1/usage").json()["exhausted"]:
            return
        premium = next(
            p for p in api.get("/api/v1/profiles").json()["items"] if p["name"] == "Premium"
        )
        c = make_conversation(api, premium["id"], title="Costly question")
        model.reply("An expensive answer.", usage=(1000, 1000))
        run = api.post(f"/api/v1/conversations/{c['id']}/turns", json={"content": "Spend"}).json()
        finished_run(api, run["run_id"])
        assert api.get("/api/v1/usage").json()["exhausted"] is True


def test_use4_the_ring_leads_to_the_usage_page_with_reset_times_and_spending_per_model(
    alice: Any, server: Server, model: FakeModelServer
) -> None:
    _spend(server, model)
    alice.reload()
    ring = alice.locator("#usage-ring")
    expect(ring).to_have_class("usage-ring exhausted")
    # The ring is the «Context and usage» button (seed 004): its popover links to the page.
    ring.click()
    alice.get_by_role("dialog", name="Context and usage").get_by_role(
        "link", name="Usage details and reset times"
    ).click()
    expect(alice).to_have_url(re.compile(r"/usage$"))
    expect(alice.get_by_role("heading", name="Usage", exact=True)).to_be_visible()
    session_reset = alice.locator("#bar-session .bar-reset")
    # "Resets in 4 h 59 min, at 5:42 PM": the delay and the browser's local time (with the
    # day when that is not today).
    expect(session_reset).to_have_text(
        re.compile(r"^Resets in \d+ h \d+ min, at ([A-Z][a-z]+, [A-Z][a-z]+ \d+ )?\d{1,2}:\d{2}")
    )
    expect(alice.locator("#bar-week .bar-reset")).to_contain_text("Resets in")
    expect(alice.locator("#bar-session .bar-amount")).to_have_text("$0.090 of $0.010")
    expect(alice.locator("#bar-session")).to_have_class(re.compile("exhausted"))
    models = alice.locator("#usage-models tbody tr")
    expect(models.first).to_contain_text("Premium")
    expect(models.first).to_contain_text("$0.090")
    expect(alice.locator("#usage-conversations")).to_contain_text("Costly question")
    expect(alice.locator("#usage-fallback-text")).to_have_text(
        "Credits exhausted: you have used the included usage for this session window. "
        "Your messages are answered by Base until it resets."
    )
    save_screenshot(alice, "usage.png", readme=True)


def test_use4_a_locked_models_turn_is_answered_by_the_fallback_and_the_feed_says_so(
    alice: Any, server: Server, model: FakeModelServer
) -> None:
    _spend(server, model)
    with server.api("alice") as api:
        premium = next(
            p for p in api.get("/api/v1/profiles").json()["items"] if p["name"] == "Premium"
        )
        c = make_conversation(api, premium["id"], title="Locked model")
        model.reply("The fallback answers.")
        run = api.post(f"/api/v1/conversations/{c['id']}/turns", json={"content": "Hi"}).json()
        done = finished_run(api, run["run_id"])
        assert done["answered_reason"] == "credits_exhausted"
    open_chat(alice, server, c)
    answer = alice.locator("#messages .message.role-assistant").last
    expect(answer).to_contain_text("The fallback answers.")
    expect(answer.locator(".answered-by")).to_have_text("Answered by Base: credits exhausted")


def test_use5_an_admin_grants_an_extension_on_the_admin_page_and_the_ring_drops(
    alice: Any,
    browser: Any,
    console: ConsoleErrors,
    server: Server,
    model: FakeModelServer,
) -> None:
    _spend(server, model)
    alice.goto(server.url + "/usage")
    alice.get_by_role("button", name="Request extension").click()
    expect(alice.locator("#usage-requests")).to_contain_text("Waiting for an answer")

    with _open_page(browser, console, "admin-grants") as admin:
        sign_in(admin, server, "root")
        admin.get_by_role("link", name="Admin").click()
        expect(admin).to_have_url(re.compile(r"/admin$"))
        request = admin.locator("#admin-requests tbody tr", has_text="alice")
        expect(request).to_contain_text("Session")
        request.get_by_label("Amount in USD for alice").fill("1")
        request.get_by_label("How long for alice").select_option("period")
        save_screenshot(admin, "admin.png", readme=True)
        request.get_by_role("button", name="Grant").click()
        expect(request).to_contain_text("Granted $1.00 for the period")
        expect(admin.locator("#admin-actions tbody tr").first).to_contain_text("root")
        expect(admin.locator("#admin-actions tbody tr").first).to_contain_text(
            "granted an extension"
        )
        expect(admin.locator("#admin-users tbody tr[data-name='alice']")).to_contain_text(
            "$0.090 of $1.01"
        )

    alice.reload()
    expect(alice.locator("#usage-requests")).to_contain_text(
        "Granted: $1.00 more for the current period"
    )
    expect(alice.locator("#usage-fallback")).to_be_hidden()
    alice.goto(server.url + "/")
    ring = alice.locator("#usage-ring")
    expect(ring).to_be_visible()
    expect(ring).not_to_have_class("usage-ring exhausted")
    # 0.09 of 1.01: the ring fills to 9 %.
    expect(ring.locator(".ring-fill")).to_have_attribute("stroke-dasharray", "9 100")
    expect(alice.locator("#model-note")).to_be_hidden()


def test_use5_the_admin_page_is_for_administrators_only(
    alice: Any, server: Server, console: ConsoleErrors
) -> None:
    console.allow(r"HTTP 403 GET .*/admin$")
    expect(alice.get_by_role("link", name="Admin")).to_have_count(0)
    response = alice.goto(server.url + "/admin")
    assert response is not None and response.status == 403
    expect(alice.get_by_role("alert")).to_have_text("Administrators only.")
