"""Message repository: append (with token counts and the message quota), history, exclusions.

``seq`` numbers a conversation's messages 1, 2, 3 … with no gaps except a deleted prefix (the
message quota removes the oldest messages; nothing else deletes single messages).  The engine
loader (:mod:`chatmem.store.engine`) relies on that to address the tail by arithmetic.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import cache
from typing import Any

from sqlalchemy import Connection, bindparam, func, insert, select, update
from sqlalchemy.orm import Session

from chatmem.context.values import Message as EngineMessage
from chatmem.context.values import ToolCall
from chatmem.errors import InvalidInput, NotFound
from chatmem.settings import Settings
from chatmem.store import quotas
from chatmem.store.conversations import ConversationRecord, touch_conversation
from chatmem.store.db import connection_of
from chatmem.store.engine import SHOWN
from chatmem.store.quotas import UNLIMITED, Limits
from chatmem.store.tables.accounts import User
from chatmem.store.tables.conversations import Conversation, Message
from chatmem.store.token_counts import counts_for_message, tokenizers_in_use
from chatmem.store.types import new_id, utcnow

ROLES = ("user", "assistant", "system", "tool")


def tool_calls_value(raw: Sequence[Any] | None) -> tuple[ToolCall, ...]:
    """Normalises tool calls given as ``ToolCall``s or dicts (flat or OpenAI-nested)."""
    calls: list[ToolCall] = []
    for item in raw or ():
        if isinstance(item, ToolCall):
            calls.append(item)
            continue
        if not isinstance(item, dict):
            raise InvalidInput("tool_calls: each item must be an object")
        nested = item.get("function")
        function: dict[str, Any] = nested if isinstance(nested, dict) else item
        name, arguments = function.get("name"), function.get("arguments", "{}")
        call_id = item.get("id")
        if not isinstance(call_id, str) or not isinstance(name, str):
            raise InvalidInput("tool_calls: each call needs a string id and name")
        if not isinstance(arguments, str):
            raise InvalidInput("tool_calls: arguments must be a JSON string")
        calls.append(ToolCall(id=call_id, name=name, arguments=arguments))
    return tuple(calls)


def _checked(
    role: str,
    content: str,
    tool_calls: Sequence[ToolCall | dict[str, Any]] | None,
    tool_call_id: str | None,
    message_id: str | None,
) -> EngineMessage:
    if role not in ROLES:
        raise InvalidInput(f"Unknown role {role!r}; use one of {', '.join(ROLES)}.")
    if not isinstance(content, str):
        raise InvalidInput("content: must be a string")
    if role == "tool" and not tool_call_id:
        raise InvalidInput("A tool message needs the tool_call_id it answers.")
    return EngineMessage(
        id=message_id or new_id(),
        role=role,  # type: ignore[arg-type]
        content=content,
        tool_calls=tool_calls_value(tool_calls),
        tool_call_id=tool_call_id,
    )


#: The columns :func:`insert_message` fills from bound values (``seq`` is computed).
_INSERTED = (
    "id",
    "conversation_id",
    "role",
    "content",
    "created_at",
    "tool_calls",
    "tool_call_id",
    "excluded",
    "meta",
    "tokens_estimate",
    "tokens_o200k",
    "tokens_cl100k",
)


@cache
def _insert_statements(owned: bool) -> tuple[Any, Any]:
    """Built once: constructing a statement costs SQLAlchemy more than SQLite takes to run
    it, and these run at every turn (``owned``: also require ``conversations.user_id``)."""
    table = Message.__table__
    next_seq = (
        select(func.coalesce(func.max(Message.seq), 0) + 1)
        .where(Message.conversation_id == bindparam("conversation_id"))
        .scalar_subquery()
    )
    source = select(
        *(bindparam(name, type_=table.c[name].type) for name in _INSERTED), next_seq
    ).where(Conversation.id == bindparam("conversation_id"))
    if owned:
        source = source.where(Conversation.user_id == bindparam("user_id"))
    insert_row = (
        insert(Message).from_select([*_INSERTED, "seq"], source).returning(Message.num, Message.seq)
    )
    touch = (
        update(Conversation)
        .where(Conversation.id == bindparam("conversation_id"))
        .values(updated_at=bindparam("now"), last_active_at=bindparam("now"))
    )
    return insert_row, touch


def _stored_row(
    connection: Connection,
    value: EngineMessage,
    conversation_id: str,
    *,
    user_id: str | None,
    created_at: datetime,
    now: datetime,
    excluded: bool,
    meta: dict[str, Any] | None,
) -> tuple[dict[str, Any], int, int] | None:
    """Inserts one message after the conversation's last (two prepared Core statements) and
    makes the conversation the most recently active; returns the inserted values with the
    row's ``num`` and ``seq``, or None when the conversation is gone (nothing written)."""
    insert_row, touch = _insert_statements(user_id is not None)
    values: dict[str, Any] = {
        "id": value.id,
        "conversation_id": conversation_id,
        "role": value.role,
        "content": value.content,
        "created_at": created_at,
        "tool_calls": [
            {"id": c.id, "name": c.name, "arguments": c.arguments} for c in value.tool_calls
        ]
        or None,
        "tool_call_id": value.tool_call_id,
        "excluded": excluded,
        "meta": meta,
        **counts_for_message(value, tokenizers_in_use(connection)),
    }
    stored = connection.execute(insert_row, {**values, "user_id": user_id}).first()
    if stored is None:
        return None
    connection.execute(touch, {"conversation_id": conversation_id, "now": now})
    return values, stored.num, stored.seq


def insert_message(
    session: Session | Connection,
    conversation_id: str,
    role: str,
    content: str,
    *,
    user_id: str | None = None,
    limits: Limits = UNLIMITED,
    tool_calls: Sequence[ToolCall | dict[str, Any]] | None = None,
    tool_call_id: str | None = None,
    meta: dict[str, Any] | None = None,
    message_id: str | None = None,
) -> str | None:
    """:func:`append_message` in two prepared Core statements, for the turn runner (no ORM
    row is loaded or flushed: this is on the way to the first token and at every checkpoint).

    One ``INSERT … SELECT`` numbers the message after the conversation's last and inserts
    only while the conversation exists (and belongs to ``user_id`` when given); one
    ``UPDATE`` makes it the most recently active.  Returns the message id, or None when the
    conversation is gone (nothing was written)."""
    value = _checked(role, content, tool_calls, tool_call_id, message_id)
    now = utcnow()
    connection = connection_of(session)
    stored = _stored_row(
        connection,
        value,
        conversation_id,
        user_id=user_id,
        created_at=now,
        now=now,
        excluded=False,
        meta=meta,
    )
    if stored is None:
        return None
    if limits.messages is not None:
        # The quota's eviction works on rows: a session in this transaction.
        orm = session if isinstance(session, Session) else Session(bind=connection)
        owner_id = user_id or orm.scalar(
            select(Conversation.user_id).where(Conversation.id == conversation_id)
        )
        owner = orm.get(User, owner_id)
        assert owner is not None
        quotas.enforce_message_quota(orm, owner, conversation_id, limits)
        orm.flush()
    return value.id


def store_message(
    session: Session | Connection,
    conversation_id: str,
    role: str,
    content: str,
    settings: Settings,
    meta: dict[str, Any] | None,
    extra: dict[str, Any],
) -> str:
    """:func:`insert_message` under the settings' quotas for a turn's step (``extra``: its
    keywords); a conversation deleted while the turn ran is ``InvalidInput``."""
    message_id = insert_message(
        session,
        conversation_id,
        role,
        content,
        limits=Limits.from_settings(settings),
        meta=meta,
        **extra,
    )
    if message_id is None:
        raise InvalidInput("The conversation was deleted while the turn ran.")
    return message_id


def append_message(
    session: Session,
    conversation: ConversationRecord,
    role: str,
    content: str,
    *,
    limits: Limits = UNLIMITED,
    tool_calls: Sequence[ToolCall | dict[str, Any]] | None = None,
    tool_call_id: str | None = None,
    excluded: bool = False,
    created_at: datetime | None = None,
    meta: dict[str, Any] | None = None,
    message_id: str | None = None,
) -> MessageRecord:
    """Stores one message at the end of the conversation and returns it as stored.

    Token counts for every tokenizer are computed here, once (CTX-2).  The conversation
    becomes the most recently active.  With a message quota the oldest messages of this
    conversation are evicted and counted on the owner (STORE-4).

    The row goes in through the prepared Core statements of :func:`insert_message` (no unit
    of work: issue 16, 1,000 appends a second); the record is made of the values written."""
    value = _checked(role, content, tool_calls, tool_call_id, message_id)
    session.flush()  # what the caller changed goes first (the ORM path's autoflush)
    now = utcnow()
    stored = _stored_row(
        session.connection(),
        value,
        conversation.id,
        user_id=None,
        created_at=created_at or now,
        now=now,
        excluded=excluded,
        meta=meta,
    )
    if stored is None:
        raise NotFound("conversation")
    values, _num, seq = stored
    if limits.messages is not None:
        owner = session.get(User, conversation.user_id)
        assert owner is not None
        quotas.enforce_message_quota(session, owner, conversation.id, limits)
    return MessageRecord(**values, seq=seq, hidden=False)


def complete_message(
    session: Session, message_id: str, content: str, meta: dict[str, Any] | None
) -> None:
    """Replaces a stored message's text with a longer one that starts with it (an answer
    recovered whole after a crash), counted again for every tokenizer (CTX-2)."""
    role, tool_calls, tool_call_id = session.execute(
        select(Message.role, Message.tool_calls, Message.tool_call_id).where(
            Message.id == message_id
        )
    ).one()
    value = _checked(role, content, tool_calls_value(tool_calls), tool_call_id, message_id)
    session.execute(
        update(Message)
        .where(Message.id == message_id)
        .values(content=content, meta=meta, **counts_for_message(value))
    )


@dataclass(frozen=True, slots=True)
class MessageRecord:
    """One stored message, as read (the columns of ``messages`` but its row number)."""

    id: str
    conversation_id: str
    seq: int
    role: str
    content: str
    created_at: datetime
    tokens_estimate: int
    tokens_o200k: int
    tokens_cl100k: int
    tool_calls: list[dict[str, Any]] | None
    tool_call_id: str | None
    excluded: bool
    meta: dict[str, Any] | None
    hidden: bool


#: The columns of a :class:`MessageRecord`, in order (a read selects these, not ORM rows).
MESSAGE_COLUMNS = (
    Message.id,
    Message.conversation_id,
    Message.seq,
    Message.role,
    Message.content,
    Message.created_at,
    Message.tokens_estimate,
    Message.tokens_o200k,
    Message.tokens_cl100k,
    Message.tool_calls,
    Message.tool_call_id,
    Message.excluded,
    Message.meta,
    Message.hidden,
)


def history(
    session: Session,
    conversation_id: str,
    *,
    after_seq: int | None = None,
    limit: int | None = None,
    hidden: bool = True,
) -> list[MessageRecord]:
    """The conversation's messages in order (``hidden``: with the hidden versions, PROJ-3)."""
    stmt = select(*MESSAGE_COLUMNS).where(Message.conversation_id == conversation_id)
    if not hidden:
        stmt = stmt.where(Message.hidden == False)  # noqa: E712
    if after_seq is not None:
        stmt = stmt.where(Message.seq > after_seq)
    stmt = stmt.order_by(Message.seq)
    if limit is not None:
        stmt = stmt.limit(limit)
    return [MessageRecord(*row) for row in session.execute(stmt)]


def message_in(
    session: Session, conversation: ConversationRecord, message_id: str
) -> MessageRecord:
    row = session.execute(
        select(*MESSAGE_COLUMNS).where(
            Message.id == message_id, Message.conversation_id == conversation.id
        )
    ).first()
    if row is None:
        raise NotFound("message")
    return MessageRecord(*row)


def set_pair_excluded(
    session: Session, conversation: ConversationRecord, message_id: str, excluded: bool
) -> list[str]:
    """CTX-15: excludes (or includes) the question–answer pair containing ``message_id``:
    the user message that opens it and everything up to the next user message.  Returns the
    ids of the pair's messages."""
    target = message_in(session, conversation, message_id)
    start = session.scalar(
        select(func.max(Message.seq)).where(
            Message.conversation_id == conversation.id,
            Message.role == "user",
            Message.seq <= target.seq,
        )
    )
    if start is None:
        start = target.seq
    end = session.scalar(
        select(func.min(Message.seq)).where(
            Message.conversation_id == conversation.id,
            Message.role == "user",
            Message.seq > target.seq,
        )
    )
    bounds = [Message.conversation_id == conversation.id, Message.seq >= start]
    if end is not None:
        bounds.append(Message.seq < end)
    session.execute(
        update(Message)
        .where(*bounds)
        .values(excluded=excluded)
        .execution_options(synchronize_session="fetch")
    )
    touch_conversation(session, conversation.id)
    return list(session.scalars(select(Message.id).where(*bounds).order_by(Message.seq)))


@dataclass(frozen=True, slots=True)
class ShownMessage:
    """A message as its client was shown it: what the OpenAI-compatible endpoint compares
    a client's history with (``chatmem.turns.history_match``)."""

    id: str
    role: str
    content: str
    tool_call_id: str | None
    meta: dict[str, Any] | None


def shown_messages(session: Session | Connection, conversation_id: str) -> list[ShownMessage]:
    """The conversation's shown messages (no hidden version, PROJ-3), in order."""
    rows = connection_of(session).execute(
        select(Message.id, Message.role, Message.content, Message.tool_call_id, Message.meta)
        .where(Message.conversation_id == conversation_id, SHOWN)
        .order_by(Message.seq)
    )
    return [ShownMessage(*row) for row in rows]
