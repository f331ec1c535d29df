"""Fixtures for the browser tests: one ``chatmem serve`` and one Chromium per module."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import expect
from tests.conftest import skip_or_fail
from tests.support.model_server import FakeModelServer
from tests.ui.harness import (
    ARTIFACTS,
    CHROMIUM,
    CHROMIUM_ARGS,
    PASSWORD,
    ConsoleErrors,
    Server,
    make_profile,
    start_server,
)

# Assertions wait up to 10 s: CI shares two cores between the server, Chromium and pytest.
expect.set_options(timeout=10_000)


@pytest.fixture(scope="module")
def model() -> Iterator[FakeModelServer]:
    server = FakeModelServer().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    srv = start_server(tmp_path_factory.mktemp("ui") / "state")
    try:
        srv.add_user("alice")
        yield srv
    finally:
        srv.stop()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not CHROMIUM.exists():
        skip_or_fail("Chromium is not installed at /usr/bin/chromium")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture
def console() -> ConsoleErrors:
    return ConsoleErrors()


@contextlib.contextmanager
def _open_page(
    browser: Any, console: ConsoleErrors, name: str, storage_state: Any = None
) -> Iterator[Any]:
    context = browser.new_context(
        viewport={"width": 1280, "height": 860}, accept_downloads=True, storage_state=storage_state
    )
    context.set_default_timeout(10_000)
    pg = context.new_page()
    console.attach(pg)
    try:
        yield pg
    finally:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        # The page may be gone after a failure; the screenshot is a bonus.
        with contextlib.suppress(Exception):
            pg.screenshot(path=str(ARTIFACTS / f"{name}.png"))
        context.close()
    assert console.unexpected() == [], "console errors in the page"


@pytest.fixture
def page(browser: Any, console: ConsoleErrors, request: pytest.FixtureRequest) -> Iterator[Any]:
    """A fresh browser context and page, signed out; fails the test on console errors."""
    with _open_page(browser, console, request.node.name) as pg:
        yield pg


def sign_in(page: Any, server: Server, name: str = "alice") -> None:
    """Sign in through the sign-in page, as a user would."""
    page.goto(server.url + "/")
    page.get_by_label("Name").fill(name)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_selector("#draft")


@pytest.fixture(scope="module")
def alice_session(browser: Any, server: Server) -> Any:
    """Alice's cookies after signing in through the sign-in page once per module."""
    context = browser.new_context()
    try:
        pg = context.new_page()
        sign_in(pg, server)
        return context.storage_state()
    finally:
        context.close()


@pytest.fixture
def alice(
    browser: Any,
    server: Server,
    alice_session: Any,
    console: ConsoleErrors,
    request: pytest.FixtureRequest,
) -> Iterator[Any]:
    """A fresh page signed in as alice, on the chat page."""
    with _open_page(browser, console, request.node.name, alice_session) as pg:
        pg.goto(server.url + "/")
        pg.wait_for_selector("#draft")
        yield pg


@pytest.fixture(scope="module")
def profiles(server: Server, model: FakeModelServer) -> dict[str, dict[str, Any]]:
    """A paid and a free profile with a 16K window, for the memory and compression tests."""
    with server.api("alice") as api:
        return {
            "paid": make_profile(
                api,
                model.base_url,
                "Paid model",
                context_window=16384,
                answer_reserve=1024,
                input_price_per_mtok=3.0,
                output_price_per_mtok=15.0,
            ),
            "free": make_profile(
                api,
                model.base_url,
                "Free model",
                context_window=16384,
                answer_reserve=1024,
                free=True,
            ),
        }
