"""Which messages of a client's chat history are new to the stored conversation.

Theory of operation
-------------------
An OpenAI-style client either keeps no state and sends the whole history with every request
(the SDK's examples, LangChain, most IDE plugins), or sends only what is new and lets the
server remember.  chatmem stores every message once, so it decides, per request, which of the
client's messages it already holds.  It compares *what the client saw*: the stored
conversation as the client's view of it —

* a user, system or client-tool message is itself (role and text; a tool result also by the
  call it answers);
* the steps of one answer (text, a tool call chatmem made on the server, its result, more
  text) are one assistant message whose text is the steps' text joined, exactly as the
  answer was streamed to the client; the server-side tool calls and results are not shown,
  nor the text kept from an answer that failed (the client got an error, so a retry of the
  same request matches and is answered again).

Then, in this order (text compared without surrounding whitespace):

1. nothing stored yet — every message is new;
2. the client's messages start with the whole stored view — the rest is new (a request equal
   to the stored view answers its last message again, e.g. a retry after a failed answer);
3. the client sent no assistant message — it sends only new messages; leading system
   messages the conversation already holds are not stored again;
4. otherwise the histories diverge (the client edited or dropped an earlier message): the
   request starts a *new* conversation holding the client's whole history.

The module is pure apart from :func:`stored_view`, which reads a conversation's messages.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from chatmem.context.values import ToolCall
from chatmem.store.history_keys import CLIENT_TOOL, view_items
from chatmem.store.messages import shown_messages
from chatmem.store.sessions import Handle

__all__ = ["CLIENT_TOOL", "Match", "Said", "StoredView", "client_view", "match_history"]


@dataclass(frozen=True)
class Said:
    """One message as an OpenAI client sees and sends it."""

    role: str
    content: str
    tool_call_id: str | None = None
    tool_calls: tuple[ToolCall, ...] = field(default=(), compare=False)
    #: A user message's images (issue 29), stored with it when it is new; matching compares
    #: the text alone, as the stored view shows it.
    images: tuple[bytes, ...] = field(default=(), compare=False, repr=False)

    def same_as(self, other: Said) -> bool:
        return (
            self.role == other.role
            and self.content.strip() == other.content.strip()
            and (self.role != "tool" or self.tool_call_id == other.tool_call_id)
        )


@dataclass(frozen=True)
class StoredView:
    """A conversation as its client sees it, and the id of its last user message (where a
    turn answering it starts)."""

    messages: tuple[Said, ...]
    last_user_id: str | None


@dataclass(frozen=True)
class Match:
    #: The client's messages to store, in order.
    new: tuple[Said, ...]
    #: True when the histories diverge: ``new`` is the whole history of a new conversation.
    diverged: bool = False


def match_history(stored: Sequence[Said], incoming: Sequence[Said]) -> Match:
    """Rules 1–4 of the module docstring."""
    if not stored:
        return Match(tuple(incoming))
    n = len(stored)
    if len(incoming) >= n and all(a.same_as(b) for a, b in zip(stored, incoming, strict=False)):
        return Match(tuple(incoming[n:]))
    if not any(m.role == "assistant" for m in incoming):
        known = {m.content.strip() for m in stored if m.role == "system"}
        start = 0
        while (
            start < len(incoming)
            and incoming[start].role == "system"
            and incoming[start].content.strip() in known
        ):
            start += 1
        return Match(tuple(incoming[start:]))
    return Match(tuple(incoming), diverged=True)


def client_view(rows: Sequence[Any]) -> StoredView:
    """Stored messages (``role``, ``content``, ``tool_call_id``, ``meta``, ``id``, in order)
    as the client saw them: one assistant message per answer, server-side tool results
    left out (the rules live with the history index, :func:`chatmem.store.history_keys.
    view_items`, so the keys and the comparison read the same view)."""
    items = view_items(rows)
    last_user = next((i.message_id for i in reversed(items) if i.role == "user"), None)
    return StoredView(tuple(Said(i.role, i.content, i.tool_call_id) for i in items), last_user)


def stored_view(session: Handle, conversation_id: str) -> StoredView:
    """The conversation's messages as its client saw them (see :func:`client_view`)."""
    return client_view(shown_messages(session, conversation_id))
