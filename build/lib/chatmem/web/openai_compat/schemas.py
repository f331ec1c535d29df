"""The ``/v1/chat/completions`` request, as OpenAI's clients send it.

Fields chatmem does not use (sampling parameters, ``user``, ``seed`` …) are accepted and
ignored: the model profile decides how the provider is called, and the request sent is the
engine's plan.  ``n`` above 1 and images are refused (one answer per turn; the endpoint takes
text).  ``tool_choice: "none"`` offers no client tools; other choices offer them as usual.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from chatmem.context.values import ToolCall
from chatmem.errors import InvalidInput
from chatmem.turns.history_match import Said

Id = Annotated[str, Field(min_length=1, max_length=200)]
#: OpenAI's own rule for function names.
FunctionName = Annotated[str, Field(pattern=r"^[a-zA-Z0-9_-]{1,64}$")]


class _Open(BaseModel):
    """Unknown fields are ignored (clients send many), known ones are checked."""

    model_config = ConfigDict(extra="ignore")


class ContentPart(_Open):
    type: str = Field(max_length=50)
    text: str | None = None


class FunctionCall(_Open):
    name: Id
    arguments: str = "{}"


class ToolCallIn(_Open):
    id: Id
    type: Literal["function"] = "function"
    function: FunctionCall


class ChatMessage(_Open):
    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[ContentPart] | None = None
    tool_calls: list[ToolCallIn] | None = Field(default=None, max_length=128)
    tool_call_id: Id | None = None

    def said(self) -> Said:
        """The message as chatmem stores it (``developer`` is a system message)."""
        if isinstance(self.content, list):
            if any(part.type != "text" for part in self.content):
                raise InvalidInput(
                    "messages: only text content is accepted here (no images or audio)"
                )
            text = "".join(part.text or "" for part in self.content)
        else:
            text = self.content or ""
        if self.role == "tool" and not self.tool_call_id:
            raise InvalidInput("messages: a tool message needs the tool_call_id it answers")
        calls = tuple(
            ToolCall(id=c.id, name=c.function.name, arguments=c.function.arguments)
            for c in self.tool_calls or ()
        )
        role = "system" if self.role == "developer" else self.role
        return Said(role, text, self.tool_call_id if self.role == "tool" else None, calls)


class FunctionDef(_Open):
    name: FunctionName
    description: str = Field(default="", max_length=100_000)
    parameters: dict[str, Any] = Field(default_factory=dict)


class ToolDef(_Open):
    type: Literal["function"]
    function: FunctionDef


class StreamOptions(_Open):
    include_usage: bool = False


class ChatCompletionRequest(_Open):
    model: Id
    messages: list[ChatMessage] = Field(min_length=1, max_length=100_000)
    stream: bool = False
    stream_options: StreamOptions | None = None
    tools: list[ToolDef] | None = Field(default=None, max_length=128)
    tool_choice: str | dict[str, Any] | None = None
    #: ``conversation_id`` here names the conversation when the header does not.
    metadata: dict[str, str] | None = None
    n: int | None = Field(default=None, ge=1, le=1)

    def said(self) -> list[Said]:
        return [m.said() for m in self.messages]

    def offered_tools(self) -> list[dict[str, Any]]:
        """The client's tools as OpenAI function schemas (none for ``tool_choice: "none"``)."""
        if self.tool_choice == "none":
            return []
        return [
            {"type": "function", "function": t.function.model_dump(exclude_unset=False)}
            for t in self.tools or ()
        ]

    @property
    def include_usage(self) -> bool:
        return bool(self.stream_options and self.stream_options.include_usage)
