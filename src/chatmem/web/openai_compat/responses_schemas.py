"""The ``/v1/responses`` request, as OpenAI's Responses clients send it (API-3).

What each field becomes (``docs/responses.md`` says it for users):

* ``input`` (a string, or items: ``message`` items with text parts, ``function_call`` items
  the client echoes back, ``function_call_output`` items answering them) → the turn's
  messages (:class:`~chatmem.turns.history_match.Said`), as a chat client's would be;
* ``instructions`` → a leading system message of those messages: stored once in the
  conversation (the same instructions resent with each request are not stored again, rule 3
  of :mod:`chatmem.turns.history_match`);
* ``tools`` (Responses' flat function shape) → Chat Completions' ``tools``;
* the sampling and output fields → the options added to each provider request
  (``max_output_tokens`` → ``max_tokens``, ``text.format`` → ``response_format``,
  ``reasoning.effort`` → ``reasoning_effort`` …, API-2).

Refused with a 400: OpenAI's hosted tools (web search, file search, computer use, code
interpreter, image generation, MCP …), files in the input and images other than data URLs
(``input_image`` with a data URL is a user message's image, as on the chat endpoint),
``item_reference`` items, ``background``, stored ``prompt`` templates,
``top_logprobs``.  Unknown fields are ignored; ``reasoning`` items a client echoes are
dropped (a model's thinking is never sent back to it in chatmem).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

from chatmem.context.values import ToolCall
from chatmem.errors import InvalidInput
from chatmem.turns.history_match import Said
from chatmem.web.openai_compat.images import image_bytes
from chatmem.web.openai_compat.schemas import FunctionName, Id

#: The tool types of OpenAI's own hosted tools: it runs them, chatmem cannot.
HOSTED_TOOLS = (
    "web_search",
    "web_search_preview",
    "file_search",
    "computer_use",
    "computer_use_preview",
    "code_interpreter",
    "image_generation",
    "mcp",
    "local_shell",
    "shell",
    "apply_patch",
    "custom",
)
_TEXT_PARTS = ("input_text", "output_text", "text", "summary_text")
_IMAGES = (
    "an input_image is a data URL in image_url (data:image/png;base64,…); file ids are OpenAI's"
)


class _Open(BaseModel):
    model_config = ConfigDict(extra="ignore")


class FunctionTool(_Open):
    type: str = Field(max_length=100)
    name: FunctionName | None = None
    description: str | None = Field(default=None, max_length=100_000)
    parameters: dict[str, Any] | None = None
    strict: bool | None = None

    def chat(self) -> dict[str, Any]:
        """The tool in Chat Completions' shape (hosted tools are refused)."""
        if self.type != "function":
            what = "OpenAI's hosted tools" if self.type in HOSTED_TOOLS else "only function tools"
            raise InvalidInput(
                f"tools: {self.type!r} is not available through chatmem ({what} cannot run "
                "here); offer function tools, or configure an MCP server in chatmem"
            )
        if self.name is None:
            raise InvalidInput("tools: a function tool needs a name")
        function: dict[str, Any] = {"name": self.name}
        if self.description is not None:
            function["description"] = self.description
        function["parameters"] = self.parameters or {"type": "object", "properties": {}}
        if self.strict is not None:
            function["strict"] = self.strict
        return {"type": "function", "function": function}

    def echo(self) -> dict[str, Any]:
        return {
            "type": "function",
            "name": self.name,
            "description": self.description,
            "parameters": self.parameters or {"type": "object", "properties": {}},
            "strict": self.strict,
        }


class TextFormat(_Open):
    type: str = Field(default="text", max_length=50)
    name: str | None = Field(default=None, max_length=64)
    schema_: dict[str, Any] | None = Field(default=None, alias="schema")
    description: str | None = Field(default=None, max_length=100_000)
    strict: bool | None = None

    def response_format(self) -> dict[str, Any] | None:
        """Chat Completions' ``response_format`` (None: plain text, the default)."""
        if self.type == "text":
            return None
        if self.type == "json_object":
            return {"type": "json_object"}
        if self.type != "json_schema":
            raise InvalidInput("text.format: use text, json_object or json_schema")
        if not self.name or self.schema_ is None:
            raise InvalidInput("text.format: a json_schema format needs a name and a schema")
        schema: dict[str, Any] = {"name": self.name, "schema": self.schema_}
        if self.description is not None:
            schema["description"] = self.description
        if self.strict is not None:
            schema["strict"] = self.strict
        return {"type": "json_schema", "json_schema": schema}


class TextConfig(_Open):
    format: TextFormat = Field(default_factory=TextFormat)
    verbosity: str | None = Field(default=None, max_length=20)


class ReasoningConfig(_Open):
    effort: str | None = Field(default=None, max_length=20)
    summary: str | None = Field(default=None, max_length=20)


class ConversationRef(_Open):
    id: Id


Metadata = dict[Annotated[str, Field(max_length=64)], Annotated[str, Field(max_length=512)]]


class ResponsesRequest(_Open):
    model: Id
    input: str | list[dict[str, Any]] = Field(min_length=1, max_length=100_000)
    instructions: str | None = Field(default=None, max_length=1_000_000)
    stream: bool = False
    tools: list[FunctionTool] | None = Field(default=None, max_length=128)
    tool_choice: str | dict[str, Any] | None = None
    parallel_tool_calls: bool | None = None
    store: bool = True
    max_output_tokens: int | None = Field(default=None, ge=1, le=10_000_000)
    text: TextConfig | None = None
    reasoning: ReasoningConfig | None = None
    temperature: float | None = Field(default=None, ge=0, le=2)
    top_p: float | None = Field(default=None, ge=0, le=1)
    previous_response_id: Id | None = None
    conversation: Id | ConversationRef | None = None
    metadata: Metadata | None = Field(default=None, max_length=16)
    background: bool | None = None
    prompt: dict[str, Any] | None = None
    top_logprobs: int | None = Field(default=None, ge=0, le=20)

    def check(self) -> None:
        """What cannot be honoured is refused (API-2), before anything is stored."""
        if self.background:
            raise InvalidInput("background: responses run in the foreground in chatmem")
        if self.prompt is not None:
            raise InvalidInput("prompt: stored prompt templates are OpenAI's; send input")
        if self.top_logprobs:
            raise InvalidInput("top_logprobs: not available on /v1/responses")
        if self.previous_response_id is not None and self.conversation is not None:
            raise InvalidInput("previous_response_id and conversation: name one of them")
        self.chat_tools()
        self.tool_choice_chat()

    @property
    def conversation_id(self) -> str | None:
        if isinstance(self.conversation, ConversationRef):
            return self.conversation.id
        return self.conversation

    def chat_tools(self) -> list[dict[str, Any]]:
        return [tool.chat() for tool in self.tools or ()]

    def tool_choice_chat(self) -> str | dict[str, Any] | None:
        """``tool_choice`` in Chat Completions' shape."""
        choice = self.tool_choice
        if choice is None or choice in ("auto", "none", "required"):
            return choice
        if isinstance(choice, Mapping) and choice.get("type") == "function":
            name = choice.get("name")
            if not isinstance(name, str) or not name:
                raise InvalidInput("tool_choice: name the function")
            if name not in {t.name for t in self.tools or ()}:
                raise InvalidInput(f"tool_choice: {name!r} is not one of the tools")
            return {"type": "function", "function": {"name": name}}
        raise InvalidInput(
            "tool_choice: use auto, none, required or {'type': 'function', 'name': …} "
            "(hosted tools cannot run through chatmem)"
        )

    def options(self) -> dict[str, Any]:
        """What is added to each provider request of the turn (API-2)."""
        options: dict[str, Any] = {}
        if self.max_output_tokens is not None:
            options["max_tokens"] = self.max_output_tokens
        for name in ("temperature", "top_p"):
            if getattr(self, name) is not None:
                options[name] = getattr(self, name)
        if self.text is not None and (fmt := self.text.format.response_format()) is not None:
            options["response_format"] = fmt
        if self.text is not None and self.text.verbosity is not None:
            options["verbosity"] = self.text.verbosity
        if self.reasoning is not None and self.reasoning.effort is not None:
            options["reasoning_effort"] = self.reasoning.effort
        if self.tools:  # providers refuse these without tools
            if (choice := self.tool_choice_chat()) is not None:
                options["tool_choice"] = choice
            if self.parallel_tool_calls is not None:
                options["parallel_tool_calls"] = self.parallel_tool_calls
        return options

    def said(self, answered_calls: frozenset[str] = frozenset()) -> list[Said]:
        """The turn's messages: ``instructions`` first, then the input's items
        (``answered_calls``: the call ids and output item ids of the response continued,
        which the conversation already holds — a client echoing them back does not store
        them again)."""
        said: list[Said] = []
        if self.instructions and self.instructions.strip():
            said.append(Said("system", self.instructions))
        if isinstance(self.input, str):
            return [*said, Said("user", self.input)]
        for index, item in enumerate(self.input):
            _take(said, item, index, answered_calls)
        return said

    def echo(self) -> dict[str, Any]:
        """The request's fields a response object shows."""
        text = self.text or TextConfig()
        return {
            "instructions": self.instructions,
            "metadata": dict(self.metadata or {}),
            "tools": [t.echo() for t in self.tools or ()],
            "tool_choice": self.tool_choice or "auto",
            "parallel_tool_calls": True
            if self.parallel_tool_calls is None
            else self.parallel_tool_calls,
            "text": text.model_dump(by_alias=True, exclude_none=True),
            "reasoning": self.reasoning.model_dump() if self.reasoning else None,
            "temperature": self.temperature,
            "top_p": self.top_p,
            "max_output_tokens": self.max_output_tokens,
            "store": self.store,
        }


def _text(content: Any, where: str) -> str:
    text, images = _parts(content, where)
    if images:
        raise InvalidInput(f"{where}: only a user message may hold images")
    return text


def _parts(content: Any, where: str) -> tuple[str, tuple[bytes, ...]]:
    """A content's text, and its ``input_image`` parts' bytes (data URLs only, as on
    ``/v1/chat/completions``: :func:`~chatmem.web.openai_compat.images.image_bytes`)."""
    if isinstance(content, str):
        return content, ()
    if not isinstance(content, list):
        raise InvalidInput(f"{where}: content is a string or a list of parts")
    texts: list[str] = []
    images: list[bytes] = []
    for part in content:
        kind = part.get("type") if isinstance(part, Mapping) else None
        if kind in _TEXT_PARTS and isinstance(part.get("text"), str):
            texts.append(part["text"])
        elif kind == "refusal" and isinstance(part.get("refusal"), str):
            texts.append(part["refusal"])
        elif kind == "input_image" and isinstance(part.get("image_url"), str):
            images.append(image_bytes(part["image_url"]))
        elif kind == "input_image":
            raise InvalidInput(f"{where}: {_IMAGES}")
        else:
            raise InvalidInput(f"{where}: only text and image parts are accepted, not {kind!r}")
    return "".join(texts), tuple(images)


def _echoed(item: Mapping[str, Any], answered: frozenset[str]) -> bool:
    item_id = item.get("id")
    return isinstance(item_id, str) and item_id in answered


def _take(said: list[Said], item: Any, index: int, answered: frozenset[str]) -> None:
    """One input item onto ``said`` (an answer's text and its calls are one message)."""
    where = f"input[{index}]"
    if not isinstance(item, Mapping):
        raise InvalidInput(f"{where}: an item is an object")
    kind = item.get("type") or ("message" if "role" in item else None)
    if kind == "message":
        if _echoed(item, answered):
            return  # an output item of the response continued, echoed back: stored already
        role = item.get("role")
        if role not in ("user", "system", "developer", "assistant"):
            raise InvalidInput(f"{where}: role is user, system, developer or assistant")
        if role == "user":
            text, images = _parts(item.get("content", ""), where)
            said.append(Said("user", text, images=images))
        else:
            said.append(
                Said(
                    "system" if role == "developer" else role, _text(item.get("content", ""), where)
                )
            )
    elif kind == "function_call":
        call_id, name = item.get("call_id"), item.get("name")
        if not isinstance(call_id, str) or not call_id or not isinstance(name, str):
            raise InvalidInput(f"{where}: a function_call needs its call_id and name")
        if call_id in answered or _echoed(item, answered):
            return  # already in the conversation: the response continued made it
        call = ToolCall(id=call_id, name=name, arguments=str(item.get("arguments") or "{}"))
        last = said[-1] if said else None
        if last is not None and last.role == "assistant":
            said[-1] = Said("assistant", last.content, tool_calls=(*last.tool_calls, call))
        else:
            said.append(Said("assistant", "", tool_calls=(call,)))
    elif kind == "function_call_output":
        call_id = item.get("call_id")
        if not isinstance(call_id, str) or not call_id:
            raise InvalidInput(f"{where}: a function_call_output needs the call_id it answers")
        said.append(Said("tool", _text(item.get("output", ""), where), call_id))
    elif kind == "reasoning":
        return  # a model's thinking is never sent back to it (chatmem keeps it beside)
    elif kind == "item_reference":
        raise InvalidInput(f"{where}: item references are not supported; send the item")
    else:
        raise InvalidInput(
            f"{where}: {kind!r} items are not accepted (messages, function_call and "
            "function_call_output are)"
        )
