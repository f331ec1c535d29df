"""``append_message``'s contract, now that it writes through the prepared Core statements of
``insert_message`` (issue 16): the record it returns is the stored row, nothing is left to
flush, the conversation's times follow, the caller's pending changes go first, the message
quota evicts as before."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from sqlalchemy import func, select

from chatmem.context.values import ToolCall
from chatmem.errors import NotFound
from chatmem.store import accounts
from chatmem.store.conversations import (
    create_conversation,
    delete_conversation,
    owned_conversation,
)
from chatmem.store.db import Database
from chatmem.store.messages import append_message, history
from chatmem.store.quotas import UNLIMITED, Limits
from chatmem.store.tables.conversations import Conversation, Message


def test_the_returned_record_is_the_stored_row(db: Database) -> None:
    at = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    with db.session() as session:
        user = accounts.create_user(session, "ann")
        chat = create_conversation(session, user, UNLIMITED)
        before = chat.last_active_at
        first = append_message(session, chat, "user", "Look this up.")
        call = ToolCall(id="call_1", name="search", arguments='{"q": "x"}')
        second = append_message(
            session,
            chat,
            "assistant",
            "",
            tool_calls=[call],
            excluded=True,
            created_at=at,
            meta={"run_id": "r1"},
            message_id="m-2",
        )
        assert (first.seq, second.seq) == (1, 2)
        assert second.id == "m-2"
        assert second.tool_calls == [{"id": "call_1", "name": "search", "arguments": '{"q": "x"}'}]
        assert second.excluded and not second.hidden and second.created_at == at
        assert second.meta == {"run_id": "r1"} and second.tokens_estimate > 0
        assert not session.dirty and not session.new  # nothing left to flush
        assert history(session, chat.id) == [first, second]  # the rows as stored
        nums = session.scalars(
            select(Message.num).where(Message.conversation_id == chat.id).order_by(Message.seq)
        ).all()
        assert nums[1] > nums[0]
        times = owned_conversation(session, user, chat.id)
        assert times.last_active_at == times.updated_at >= before
        chat_id, stamp = chat.id, times.last_active_at
    with db.session() as session:
        stored = session.get(Conversation, chat_id)
        assert stored is not None and stored.last_active_at == stamp
        rows = session.scalars(
            select(Message).where(Message.conversation_id == chat_id).order_by(Message.seq)
        ).all()
        assert [(m.id, m.seq, m.role) for m in rows] == [
            (first.id, 1, "user"),
            ("m-2", 2, "assistant"),
        ]


def test_pending_changes_go_first(db: Database) -> None:
    with db.session() as session:
        user = accounts.create_user(session, "ann")
        chat = Conversation(user_id=user.id, title="Not flushed yet")
        session.add(chat)  # pending: the insert must see it
        row = append_message(session, chat, "user", "Hello")
        assert row.seq == 1 and row.conversation_id == chat.id


def test_a_conversation_gone_is_not_found(db: Database) -> None:
    with db.session() as session:
        user = accounts.create_user(session, "ann")
        chat = create_conversation(session, user, UNLIMITED)
        delete_conversation(session, chat)
        with pytest.raises(NotFound):
            append_message(session, chat, "user", "Hello")


def test_the_message_quota_evicts_the_oldest(db: Database) -> None:
    limits = Limits(messages=3)
    with db.session() as session:
        user = accounts.create_user(session, "ann")
        chat = create_conversation(session, user, UNLIMITED)
        for i in range(5):
            append_message(session, chat, "user", f"m{i}", limits=limits)
        kept = session.scalars(
            select(Message.content).where(Message.conversation_id == chat.id).order_by(Message.seq)
        ).all()
        assert kept == ["m2", "m3", "m4"]
        assert append_message(session, chat, "user", "m5", limits=limits).seq == 6
        count = session.scalar(
            select(func.count()).select_from(Message).where(Message.conversation_id == chat.id)
        )
        assert count == 3
