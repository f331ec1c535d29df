"""The engine's own errors.  Pure: no HTTP, no imports from the rest of chatmem.

Each carries a ``code`` (the CONTRACT error code) and ``details()`` (JSON-safe data) so the
web layer and the CLI can render it without knowing the class.
"""

from __future__ import annotations

from typing import Any


class EngineError(Exception):
    code = "engine_error"

    def details(self) -> dict[str, Any]:
        return {}


class PlanInputError(EngineError, ValueError):
    """The input to the engine is inconsistent (unknown mode, dangling tool result, …)."""

    code = "invalid_input"


class DoesNotFit(EngineError):
    """CTX-19: the request does not fit the model's window even after compaction."""

    code = "does_not_fit"

    def __init__(self, needed: int, available: int) -> None:
        super().__init__(
            "The message does not fit in the model's memory. Compress the memory, remove "
            "files, or start a new chat."
        )
        self.needed = needed
        self.available = available

    def details(self) -> dict[str, Any]:
        return {"needed": self.needed, "available": self.available}
