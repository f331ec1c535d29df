"""API-3: the rows of OpenAI's Responses and Conversations APIs (``tables.openai_objects``).

Rules:

* A response belongs to the user whose run answered it: every lookup is scoped to the owner,
  and another user's id answers exactly like a missing one (STORE-1).
* Forgetting a response deletes its row only: the run (still in the ledger and the UI) and
  the conversation's messages stay, and the id is unknown afterwards.
* A conversation's metadata is kept for the conversations the user owns.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import bindparam, delete, insert, select
from sqlalchemy.orm import Session

from chatmem.context.values import ToolCall
from chatmem.errors import NotFound
from chatmem.store.conversations import owned_conversation_row
from chatmem.store.engine import SHOWN
from chatmem.store.messages import tool_calls_value
from chatmem.store.runs import RunRecord, StoredEvent, events_after, owned_run
from chatmem.store.tables.conversations import Message
from chatmem.store.tables.openai_objects import ApiConversationRow, ResponseRow
from chatmem.store.types import utcnow


@dataclass(frozen=True, slots=True)
class ResponseRecord:
    run_id: str
    user_id: str
    conversation_id: str
    previous_run_id: str | None
    echo: dict[str, Any]
    created_at: datetime


@dataclass(frozen=True, slots=True)
class StoredResponse:
    """A response as ``GET /v1/responses/{id}`` answers it: its row, its run, its events."""

    response: ResponseRecord
    run: RunRecord
    events: list[StoredEvent]


_OWNED = select(
    ResponseRow.run_id,
    ResponseRow.user_id,
    ResponseRow.conversation_id,
    ResponseRow.previous_run_id,
    ResponseRow.echo,
    ResponseRow.created_at,
).where(ResponseRow.run_id == bindparam("rid"), ResponseRow.user_id == bindparam("uid"))


def owned_response(session: Session, user_id: str, run_id: str) -> ResponseRecord:
    """The user's stored response (one indexed read), else :class:`NotFound`."""
    row = session.execute(_OWNED, {"rid": run_id, "uid": user_id}).first()
    if row is None:
        raise NotFound("response")
    run_id_, owner, conversation_id, previous, echo, created = row
    return ResponseRecord(run_id_, owner, conversation_id, previous, dict(echo or {}), created)


def save_response(
    session: Session,
    user_id: str,
    run_id: str,
    conversation_id: str,
    previous_run_id: str | None,
    echo: Mapping[str, Any],
) -> None:
    session.execute(
        insert(ResponseRow).values(
            run_id=run_id,
            user_id=user_id,
            conversation_id=conversation_id,
            previous_run_id=previous_run_id,
            echo=dict(echo),
            created_at=utcnow(),
        )
    )


def stored_response(session: Session, user_id: str, run_id: str) -> StoredResponse:
    """The response, its run and the events the run stored so far (all of them once it
    ended)."""
    response = owned_response(session, user_id, run_id)
    run = owned_run(session, user_id, run_id)
    return StoredResponse(response, run, events_after(session, run_id, 0))


def forget_response(session: Session, user_id: str, run_id: str) -> None:
    owned_response(session, user_id, run_id)
    session.execute(delete(ResponseRow).where(ResponseRow.run_id == run_id))


def conversation_meta(session: Session, user_id: str, conversation_id: str) -> dict[str, Any]:
    """The user's conversation's metadata ({} when none was given), else :class:`NotFound`."""
    owned_conversation_row(session, user_id, conversation_id)
    row = session.get(ApiConversationRow, conversation_id)
    return dict(row.meta or {}) if row is not None else {}


def set_conversation_meta(session: Session, conversation_id: str, meta: Mapping[str, Any]) -> None:
    row = session.get(ApiConversationRow, conversation_id)
    if row is None:
        session.add(ApiConversationRow(conversation_id=conversation_id, meta=dict(meta)))
    else:
        row.meta = dict(meta)


@dataclass(frozen=True, slots=True)
class ItemMessage:
    """A shown message with what a Conversations API item needs of it."""

    id: str
    role: str
    content: str
    tool_call_id: str | None
    meta: dict[str, Any] | None
    tool_calls: tuple[ToolCall, ...]
    created_at: datetime


def conversation_messages(session: Session, conversation_id: str) -> list[ItemMessage]:
    """The conversation's shown messages (no hidden version, PROJ-3) in order, with their
    tool calls (the caller checked the owner)."""
    rows = session.execute(
        select(
            Message.id,
            Message.role,
            Message.content,
            Message.tool_call_id,
            Message.meta,
            Message.tool_calls,
            Message.created_at,
        )
        .where(Message.conversation_id == conversation_id, SHOWN)
        .order_by(Message.seq)
    )
    return [
        ItemMessage(id_, role, content or "", call, meta, tool_calls_value(calls), created)
        for id_, role, content, call, meta, calls, created in rows
    ]
