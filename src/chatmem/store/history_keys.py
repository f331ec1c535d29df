"""The history index: which of a user's conversations an OpenAI client's request continues
when it names none (API-1, issue 29).

Theory of operation
-------------------
A client that keeps its own history sends all of it with every request.  Its conversation is
the one whose *client view* (the stored messages as the client saw them, :func:`view_items`;
the rules are :mod:`chatmem.turns.history_match`'s) the request repeats.  Comparing the
request with every conversation would cost O(conversations × history), so each conversation
carries two keys, hash chains over its view (``history_keys``, one index on
``(user_id, key)``):

* ``seen`` — the chain over the view without its trailing user and tool messages;
* ``asked`` — the chain over the whole view, when it ends with the client's messages (the
  answer is still to come, or failed).

A request's *prefix* is its messages without the trailing user and tool messages (the new
ones).  It looks for ``seen`` = chain(prefix) — the client continues after the answer it was
shown, or retries a failed one — and, when the prefix ends with an answer,
``asked`` = chain(prefix without that answer) — the answer came after the keys were written.
Both in one indexed read (:func:`candidates`), most recently active first.  A prefix without
an answer (a new chat: one user message, perhaps a system prompt) looks up nothing.

The keys are written when an OpenAI request is admitted (the view it leaves behind is the
request's own history), at import and by the migration that made the table.  Everything else
that changes a view (a turn in the UI, a regenerated answer, a version shown, an edit, the
message quota's eviction) leaves the keys stale, so a key is a hint: the caller verifies a
hit against the stored view before it uses it (:mod:`chatmem.turns.history_turns`), and
rewrites the keys of a stale one from its view (:func:`index_conversation`).

A chain link is ``blake2b(previous ‖ role ‖ text ‖ tool_call_id)`` over each message with its
text stripped of surrounding whitespace and the tool call id only for a tool result — exactly
what ``Said.same_as`` compares, so equal chains mean equal histories up to a collision of a
128-bit hash, and verification rules even that out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from hashlib import blake2b
from typing import Any, Protocol

from sqlalchemy import Connection, bindparam, delete, false, insert, select
from sqlalchemy.orm import Session

from chatmem.errors import InvalidInput
from chatmem.store.db import connection_of
from chatmem.store.tables.conversations import Conversation, Message
from chatmem.store.tables.history_keys import HistoryKey

#: ``meta`` key marking a tool message as a client's tool result (it was sent, not made).
CLIENT_TOOL = "client_tool"
#: How long a client's own conversation key may be.
MAX_CLIENT_KEY = 200
#: How many candidates one lookup hands back (the same history in more conversations).
CANDIDATES = 4

_PREFIX = {"seen": "s:", "asked": "a:", "client": "c:"}
_SEP = b"\x1f"


class ShownRow(Protocol):
    @property
    def id(self) -> str: ...
    @property
    def role(self) -> str: ...
    @property
    def content(self) -> str: ...
    @property
    def tool_call_id(self) -> str | None: ...
    @property
    def meta(self) -> dict[str, Any] | None: ...


@dataclass(frozen=True, slots=True)
class ViewItem:
    """One message of a client view: role, text, the call a tool result answers, and the id
    of the stored message it starts with."""

    role: str
    content: str
    tool_call_id: str | None
    message_id: str


def view_items(rows: Iterable[ShownRow]) -> list[ViewItem]:
    """Shown messages in order as their client saw them: one assistant message per answer
    (its steps' text joined), no tool result chatmem made itself, nothing of a failed answer."""
    view: list[ViewItem] = []
    for row in rows:
        role, content, meta = row.role, row.content or "", row.meta or {}
        if role == "tool" and not meta.get(CLIENT_TOOL):
            continue  # a tool chatmem called itself (MCP): not the client's business
        if role == "assistant" and meta.get("failed"):
            continue  # what a failed answer had said: the client got an error instead
        if role == "assistant" and view and view[-1].role == "assistant":
            last = view[-1]
            view[-1] = ViewItem("assistant", last.content + content, None, last.message_id)
            continue
        view.append(ViewItem(role, content, row.tool_call_id, row.id))
    return view


class Said(Protocol):
    """What a chain reads of a message (``ViewItem``, ``turns.history_match.Said``)."""

    @property
    def role(self) -> str: ...
    @property
    def content(self) -> str: ...
    @property
    def tool_call_id(self) -> str | None: ...


def _link(previous: bytes, said: Said) -> bytes:
    tool = (said.tool_call_id or "") if said.role == "tool" else ""
    part = _SEP.join((said.role.encode(), said.content.strip().encode(), tool.encode()))
    return blake2b(previous + _SEP + part, digest_size=16).digest()


def chains(messages: Sequence[Said]) -> list[bytes]:
    """The chain after each prefix: ``chains(m)[i]`` covers ``m[:i]`` (``[0]`` is empty)."""
    out = [b""]
    for said in messages:
        out.append(_link(out[-1], said))
    return out


def answered_end(messages: Sequence[Said]) -> int:
    """The length of ``messages`` without its trailing user and tool messages."""
    end = len(messages)
    while end and messages[end - 1].role in ("user", "tool"):
        end -= 1
    return end


def lookup_keys(messages: Sequence[Said], links: Sequence[bytes] | None = None) -> list[str]:
    """The keys a request's history may find its conversation by (none for a new chat: a
    prefix with no answer in it).  ``links``: :func:`chains` of ``messages``, when known."""
    end = answered_end(messages)
    if not any(m.role == "assistant" for m in messages[:end]):
        return []
    links = links if links is not None else chains(messages[:end])
    keys = [_PREFIX["seen"] + links[end].hex()]
    if messages[end - 1].role == "assistant":
        keys.append(_PREFIX["asked"] + links[end - 1].hex())
    return keys


def view_keys(view: Sequence[Said], links: Sequence[bytes] | None = None) -> dict[str, str]:
    """The keys of a conversation whose client view is ``view`` (see the module docstring)."""
    links = links if links is not None else chains(view)
    end = answered_end(view)
    keys: dict[str, str] = {}
    if end:
        keys["seen"] = _PREFIX["seen"] + links[end].hex()
    if end < len(view):
        keys["asked"] = _PREFIX["asked"] + links[len(view)].hex()
    return keys


def client_key(name: str) -> str:
    """A client's own conversation key as stored (checked: 1 to 200 printable characters)."""
    if not name or len(name) > MAX_CLIENT_KEY or not name.isprintable():
        raise InvalidInput(
            f"conversation: a conversation key is 1 to {MAX_CLIENT_KEY} printable characters"
        )
    return _PREFIX["client"] + name


# -- reads -----------------------------------------------------------------------------------
#: Built once (constructing a statement costs SQLAlchemy more than SQLite takes to run it):
#: this runs on the way to a headerless request's first token.
_CANDIDATES = (
    select(HistoryKey.conversation_id)
    .join(Conversation, Conversation.id == HistoryKey.conversation_id)
    .where(
        HistoryKey.user_id == bindparam("user_id"),
        HistoryKey.key.in_(bindparam("keys", expanding=True)),
        Conversation.archived_at.is_(None),
    )
    .order_by(Conversation.last_active_at.desc(), Conversation.id.desc())
    .limit(CANDIDATES * 2)
)


def candidates(session: Session | Connection, user_id: str, keys: Sequence[str]) -> list[str]:
    """The user's conversations (not archived) holding any of ``keys``, most recently active
    first: one read of the ``(user_id, key)`` index."""
    if not keys:
        return []
    rows = connection_of(session).execute(_CANDIDATES, {"user_id": user_id, "keys": list(keys)})
    found = list(dict.fromkeys(row[0] for row in rows))
    return found[:CANDIDATES]


def client_conversation(session: Session | Connection, user_id: str, name: str) -> str | None:
    """The user's conversation the client named ``name`` (its own key), if any (an archived
    one is none: the key goes to a new conversation)."""
    return connection_of(session).scalar(
        select(HistoryKey.conversation_id)
        .join(Conversation, Conversation.id == HistoryKey.conversation_id)
        .where(
            HistoryKey.user_id == user_id,
            HistoryKey.kind == "client",
            HistoryKey.key == client_key(name),
            Conversation.archived_at.is_(None),
        )
    )


def conversation_keys(session: Session | Connection, conversation_id: str) -> dict[str, str]:
    """A conversation's keys by kind (for tests and the stale check)."""
    rows = connection_of(session).execute(
        select(HistoryKey.kind, HistoryKey.key).where(HistoryKey.conversation_id == conversation_id)
    )
    return {row.kind: row.key for row in rows}


# -- writes ----------------------------------------------------------------------------------
def set_view_keys(
    session: Session | Connection, user_id: str, conversation_id: str, keys: dict[str, str]
) -> None:
    """Replaces the conversation's ``seen`` and ``asked`` keys with ``keys``."""
    connection = connection_of(session)
    connection.execute(
        delete(HistoryKey).where(
            HistoryKey.conversation_id == conversation_id,
            HistoryKey.kind.in_(("seen", "asked")),
        )
    )
    if keys:
        connection.execute(
            insert(HistoryKey),
            [
                {"conversation_id": conversation_id, "kind": kind, "user_id": user_id, "key": key}
                for kind, key in keys.items()
            ],
        )


def set_client_key(
    session: Session | Connection, user_id: str, conversation_id: str, name: str
) -> None:
    """The client's key ``name`` names ``conversation_id`` from now on (taken from the one it
    named before: a client whose edited history started a new conversation follows it)."""
    key, connection = client_key(name), connection_of(session)
    connection.execute(
        delete(HistoryKey).where(
            HistoryKey.user_id == user_id, HistoryKey.kind == "client", HistoryKey.key == key
        )
    )
    connection.execute(
        delete(HistoryKey).where(
            HistoryKey.conversation_id == conversation_id, HistoryKey.kind == "client"
        )
    )
    connection.execute(
        insert(HistoryKey).values(
            conversation_id=conversation_id, kind="client", user_id=user_id, key=key
        )
    )


def _shown_rows(connection: Connection, conversation_id: str) -> list[Any]:
    return list(
        connection.execute(
            select(Message.id, Message.role, Message.content, Message.tool_call_id, Message.meta)
            .where(Message.conversation_id == conversation_id, Message.hidden == false())
            .order_by(Message.seq)
        )
    )


def index_conversation(session: Session | Connection, conversation_id: str) -> dict[str, str]:
    """Writes the conversation's keys from its stored view (import, a stale hit, the
    backfill); returns them."""
    connection = connection_of(session)
    user_id = connection.scalar(
        select(Conversation.user_id).where(Conversation.id == conversation_id)
    )
    if user_id is None:
        return {}
    keys = view_keys(view_items(_shown_rows(connection, conversation_id)))
    set_view_keys(connection, user_id, conversation_id, keys)
    return keys


@dataclass(frozen=True, slots=True)
class _Row:
    id: str
    role: str
    content: str
    tool_call_id: str | None
    meta: dict[str, Any] | None


def key_rows(
    user_id: str, conversation_id: str, messages: Iterable[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """``history_keys`` rows for a conversation being written whole (import: ``messages``
    are its ``messages`` rows, in order)."""
    shown = (
        _Row(m["id"], m["role"], m["content"], m.get("tool_call_id"), m.get("meta"))
        for m in messages
        if not m.get("hidden")
    )
    keys = view_keys(view_items(shown))
    return [
        {"conversation_id": conversation_id, "kind": kind, "user_id": user_id, "key": key}
        for kind, key in keys.items()
    ]


def backfill(connection: Connection) -> int:
    """Indexes every conversation (migration 0020); returns how many."""
    ids = list(connection.scalars(select(Conversation.id).order_by(Conversation.id)))
    for conversation_id in ids:
        index_conversation(connection, conversation_id)
    return len(ids)
