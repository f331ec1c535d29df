"""Tools the client runs itself (the OpenAI-compatible endpoint's ``tools``).

A client of ``/v1/chat/completions`` may offer the model its own functions.  They are offered
beside the turn's MCP tools — counted in the plan's Tools row like them — but chatmem never
calls them: when an answer asks for one, the turn ends there with the assistant message (and
its calls) stored, and the calls go back to the client (``finish_reason: "tool_calls"``).
The client's next request carries the results as ``tool`` messages, which are stored like
any tool result, and the turn that answers them continues from the stored history.

A client tool whose name is also an MCP tool's shadows nothing: the MCP tool keeps the name
and the client's is not offered (the server cannot tell two tools of one name apart).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from chatmem.context.values import ToolCall
from chatmem.tools.toolbox import ToolBox, ToolOutcome, ToolRoute


def tool_name(schema: Mapping[str, Any]) -> str:
    function = schema.get("function")
    return str(function.get("name", "")) if isinstance(function, Mapping) else ""


class ClientTools(ToolBox):
    """The turn's own tools (``inner``) plus the client's, which are handed back."""

    def __init__(self, inner: ToolBox, schemas: Sequence[Mapping[str, Any]]) -> None:
        self._inner = inner
        taken = {tool_name(s) for s in inner.schemas}
        own = [dict(s) for s in schemas if tool_name(s) not in taken]
        self.client_names = frozenset(tool_name(s) for s in own)
        self.schemas = [*inner.schemas, *own]

    def handed_back(self, calls: Sequence[ToolCall]) -> list[ToolCall]:
        """The calls the client makes, in the answer's order."""
        return [call for call in calls if call.name in self.client_names]

    def route(self, name: str) -> ToolRoute | None:
        return self._inner.route(name)

    async def call(self, name: str, arguments: str) -> ToolOutcome:
        return await self._inner.call(name, arguments)

    async def aclose(self) -> None:
        await self._inner.aclose()
