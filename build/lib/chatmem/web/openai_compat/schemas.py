"""The ``/v1/chat/completions`` request, as OpenAI's clients send it.

The parameters that change the answer (``temperature``, ``max_tokens``, ``response_format``,
``tool_choice`` …) are checked and passed to the provider as given
(:mod:`chatmem.models.request_options`, :meth:`ChatCompletionRequest.options`); what cannot
be honoured is refused (``n`` above 1, ``logprobs``, audio …).  The request sent is still
the engine's plan of the conversation.  Other fields chatmem does not use are ignored.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from chatmem.context.values import ToolCall
from chatmem.errors import InvalidInput
from chatmem.models.request_options import checked_request_options, forced_tool
from chatmem.turns.history_match import Said
from chatmem.web.openai_compat.images import image_bytes

Id = Annotated[str, Field(min_length=1, max_length=200)]
#: ``user`` names a conversation only with this prefix (clients put a user's name there).
USER_CONVERSATION = "conversation:"
#: OpenAI's own rule for function names.
FunctionName = Annotated[str, Field(pattern=r"^[a-zA-Z0-9_-]{1,64}$")]


class _Open(BaseModel):
    """Unknown fields are ignored (clients send many), known ones are checked."""

    model_config = ConfigDict(extra="ignore")


class ImageUrl(_Open):
    url: str
    detail: Literal["auto", "low", "high"] | None = None


class ContentPart(_Open):
    type: str = Field(max_length=50)
    text: str | None = None
    #: ``{"url": "data:image/…"}`` (a bare string as some clients send it).
    image_url: ImageUrl | str | None = None

    def image(self) -> bytes:
        """The image of an ``image_url`` part (:func:`image_bytes`: data URLs only)."""
        url = self.image_url.url if isinstance(self.image_url, ImageUrl) else self.image_url
        if not url:
            raise InvalidInput("messages: an image_url part needs its url", param="messages")
        return image_bytes(url)


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
        images: tuple[bytes, ...] = ()
        if isinstance(self.content, list):
            kinds = {part.type for part in self.content}
            if not kinds <= {"text", "image_url"}:
                raise InvalidInput(
                    "messages: content parts are text and image_url (no audio or files)",
                    param="messages",
                )
            if "image_url" in kinds and self.role != "user":
                raise InvalidInput("messages: only a user message may hold images")
            text = "".join(part.text or "" for part in self.content if part.type == "text")
            images = tuple(p.image() for p in self.content if p.type == "image_url")
        else:
            text = self.content or ""
        if self.role == "tool" and not self.tool_call_id:
            raise InvalidInput("messages: a tool message needs the tool_call_id it answers")
        calls = tuple(
            ToolCall(id=c.id, name=c.function.name, arguments=c.function.arguments)
            for c in self.tool_calls or ()
        )
        role = "system" if self.role == "developer" else self.role
        return Said(role, text, self.tool_call_id if self.role == "tool" else None, calls, images)


class FunctionDef(_Open):
    name: FunctionName
    description: str = Field(default="", max_length=100_000)
    parameters: dict[str, Any] = Field(default_factory=dict)


class ToolDef(_Open):
    type: Literal["function"]
    function: FunctionDef


class StreamOptions(_Open):
    include_usage: bool = False


class ChatCompletionRequest(BaseModel):
    #: Kept, not ignored: the request options are read from the fields beside these.
    model_config = ConfigDict(extra="allow")

    model: Id
    messages: list[ChatMessage] = Field(min_length=1, max_length=100_000)
    stream: bool = False
    stream_options: StreamOptions | None = None
    tools: list[ToolDef] | None = Field(default=None, max_length=128)
    tool_choice: str | dict[str, Any] | None = None
    #: ``conversation_id`` here names the conversation when the header does not.
    metadata: dict[str, str] | None = None
    n: int | None = Field(default=None, ge=1, le=1)
    #: OpenAI's end-user id: names a conversation only as ``conversation:<key>``
    #: (:meth:`conversation_name`) — clients send a user's name or id here.
    user: str | None = Field(default=None, max_length=1000)
    #: OpenAI's own field: ``false`` answers statelessly (nothing stored, API-1).
    store: bool | None = None

    def conversation_name(self, header: str | None) -> str | None:
        """The conversation the request names (API-1): the ``X-Chatmem-Conversation``
        header, else ``metadata.conversation_id``, else ``user`` when it reads
        ``conversation:<key>``; None: the history index decides."""
        if header:
            return header
        named = (self.metadata or {}).get("conversation_id")
        if named:
            return named
        if self.user and self.user.startswith(USER_CONVERSATION):
            return self.user[len(USER_CONVERSATION) :] or None
        return None

    def said(self) -> list[Said]:
        return [m.said() for m in self.messages]

    def options(self) -> dict[str, Any]:
        """The request options passed to the provider as given, checked
        (:func:`~chatmem.models.request_options.checked_request_options`); a ``tool_choice``
        that forces a tool must name one of the offered tools."""
        options = checked_request_options(
            {**(self.model_extra or {}), "tool_choice": self.tool_choice}
        )
        offered = {t.function.name for t in self.tools or ()}
        forced = forced_tool(options)
        if forced is not None and forced not in offered:
            raise InvalidInput(
                f"tool_choice: the function {forced!r} is not among the tools offered",
                param="tool_choice",
            )
        if options.get("tool_choice") == "required" and not offered:
            raise InvalidInput('tool_choice: "required" needs tools', param="tool_choice")
        return options

    def offered_tools(self) -> list[dict[str, Any]]:
        """The client's tools as OpenAI function schemas (``tool_choice`` travels with
        them, :meth:`options`)."""
        return [
            {"type": "function", "function": t.function.model_dump(exclude_unset=False)}
            for t in self.tools or ()
        ]

    @property
    def include_usage(self) -> bool:
        return bool(self.stream_options and self.stream_options.include_usage)
