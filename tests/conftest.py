"""Shared fixtures.  Every test gets its own state directory and a clean ``CHATMEM_*`` env."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings

# Property tests draw the same examples on every run of `make test`, so a green CI run means
# the same as the one before it; HYPOTHESIS_PROFILE=explore draws new ones (look for bugs).
settings.register_profile("default", derandomize=True)
settings.register_profile("explore", derandomize=False, max_examples=2_000)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))

# Fixture modules shared by the whole suite (each lives in tests/support/).
pytest_plugins = ["tests.support.model_server", "tests.support.app"]


def services_required() -> bool:
    return os.environ.get("CHATMEM_REQUIRE_SERVICES") == "1"


def skip_or_fail(reason: str) -> None:
    """Skip with a reason, unless CI requires the service (then fail loudly)."""
    if services_required():
        pytest.fail(f"required service unavailable: {reason}")
    pytest.skip(reason)


@pytest.fixture(autouse=True)
def clean_environ(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    for key in list(os.environ):
        if key.startswith("CHATMEM_") and key != "CHATMEM_REQUIRE_SERVICES":
            monkeypatch.delenv(key, raising=False)
    state = tmp_path / "state"
    monkeypatch.setenv("CHATMEM_STATE_DIR", str(state))
    yield state
