"""A clock the test moves by hand, for time-based behaviour (TTLs, expiry, throttles).

Pass it where the code takes a ``clock`` (``LocalCoordinator(clock=...)``), or, for code that
reads ``time.monotonic()`` itself, put :meth:`ManualClock.as_time_module` in place of that
module's ``time`` with ``monkeypatch`` (only that module sees it; the event loop and
everything else keep the real clock).
"""

from __future__ import annotations

import time
from typing import Any


class ManualClock:
    """Monotonic seconds that only move when :meth:`advance` is called."""

    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        assert seconds >= 0, "a monotonic clock does not go back"
        self.now += seconds

    def as_time_module(self) -> Any:
        """A stand-in for the ``time`` module whose ``monotonic()`` is this clock."""
        return _TimeOn(self)


class _TimeOn:
    def __init__(self, clock: ManualClock) -> None:
        self._clock = clock

    def monotonic(self) -> float:
        return self._clock()

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)
