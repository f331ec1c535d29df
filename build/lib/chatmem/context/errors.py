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

    def __init__(self, needed: int, available: int, message: str | None = None) -> None:
        super().__init__(
            message
            or "The message does not fit in the model's memory. Compress the memory, remove "
            "files, or start a new chat."
        )
        self.needed = needed
        self.available = available

    def details(self) -> dict[str, Any]:
        return {"needed": self.needed, "available": self.available}


class ToolResultTooLarge(DoesNotFit):
    """CTX-13: a tool result of the turn in progress cannot be sent even with everything else
    folded away.  It stays stored; the turn ends with this error, which names the tool (not
    the user's message), and later turns treat the pair as ordinary history."""

    def __init__(
        self, tool: str, tokens: int, message_id: str, *, needed: int, available: int
    ) -> None:
        super().__init__(
            needed,
            available,
            f"The result of tool {tool} is too large for the model's memory ({tokens:,} "
            "tokens); it is kept in the conversation but left out of memory.",
        )
        self.tool = tool
        self.tokens = tokens
        self.message_id = message_id

    def details(self) -> dict[str, Any]:
        return {
            **super().details(),
            "tool": self.tool,
            "tokens": self.tokens,
            "message_id": self.message_id,
        }
