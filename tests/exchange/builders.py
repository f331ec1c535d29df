"""Test helpers shared by the exchange and archive tests: a database, users, and a
conversation using every stored feature (folder, pin, mode, tool calls, exclusions, summaries,
files, message meta), built through the storage core's own repositories."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from chatmem.context.values import ToolCall
from chatmem.store import accounts, files, messages
from chatmem.store.conversations import create_conversation, create_folder
from chatmem.store.db import Database
from chatmem.store.exchange.exporter import export_stream
from chatmem.store.quotas import UNLIMITED
from chatmem.store.tables.accounts import User
from chatmem.store.tables.conversations import TOKEN_COLUMNS, Conversation, Message, Summary
from chatmem.store.token_counts import counts_for_text

T0 = datetime(2026, 11, 30, 10, 0, tzinfo=UTC)
PROFILE = {
    "context_window": 16384,
    "answer_reserve": 2048,
    "tokenizer": "o200k_base",
    "stateless": True,
}


def open_db(url: str) -> Database:
    db = Database(url)
    db.migrate()
    return db


def make_user(db: Database, name: str) -> str:
    with db.session() as session:
        return accounts.create_user(session, name).id


def user_row(session: Session, user_id: str) -> User:
    user = session.get(User, user_id)
    assert user is not None
    return user


def rich_conversation(
    db: Database, user_id: str, *, title: str = "Kitchen plans", turns: int = 1
) -> str:
    """A conversation exercising every stored feature; returns its id."""
    with db.session() as session:
        user = user_row(session, user_id)
        folder = session.scalar(select(func.count()).select_from(Conversation)) or 0
        folder_row = create_folder(session, user, f"Home {folder}", UNLIMITED)
        conversation = create_conversation(
            session,
            user,
            UNLIMITED,
            title=title,
            folder_id=folder_row.id,
            pinned=True,
            mode="economy",
            instructions="Answer briefly.",
        )
        session.execute(  # the export's own column (chatmem.store.exchange owns it)
            update(Conversation)
            .where(Conversation.id == conversation.id)
            .values(meta={"profile": dict(PROFILE)})
        )
        at = T0
        first = second = None
        for turn in range(turns):
            at += timedelta(minutes=1)
            q = messages.append_message(
                session, conversation, "user", f"I want a new kitchen ü {turn}", created_at=at
            )
            a = messages.append_message(
                session, conversation, "assistant", f"Which style? {turn}", created_at=at
            )
            first = first or q
            second = second or a
        ask = messages.append_message(
            session, conversation, "user", "Look up prices.", created_at=at
        )
        messages.append_message(
            session,
            conversation,
            "assistant",
            "",
            created_at=at,
            tool_calls=[
                ToolCall(id="call_1", name="search", arguments=json.dumps({"q": "kitchen"}))
            ],
        )
        messages.append_message(
            session, conversation, "tool", "About 10k EUR.", tool_call_id="call_1", created_at=at
        )
        messages.append_message(
            session,
            conversation,
            "assistant",
            "Roughly 10,000 euros.",
            created_at=at,
            meta={"run_id": "r1"},
        )
        messages.set_pair_excluded(session, conversation, ask.id, True)
        assert first is not None and second is not None
        files.add_file(
            session, conversation, "plan.txt", "3m x 4m", message_id=first.id, state="pinned"
        )
        files.add_file(session, conversation, "loose.md", "# notes", state="excluded")
        for version, text in ((1, "The user plans a kitchen."), (2, "Kitchen, 10k budget.")):
            session.add(
                Summary(
                    conversation_id=conversation.id,
                    version=version,
                    first_message_id=first.id,
                    through_message_id=second.id,
                    message_count=2,
                    text=text,
                    focus="budget" if version == 2 else None,
                    cost=0.001 * version,
                    model="m",
                    created_at=T0 + timedelta(hours=version),
                    **counts_for_text(text),
                )
            )
        return conversation.id


def exported(db: Database, conversation_ids: list[str]) -> list[dict[str, Any]]:
    with db.session() as session:
        document = json.loads(b"".join(export_stream(session, conversation_ids)))
    assert document["format"] == "chatmem.export/1"
    return document["conversations"]  # type: ignore[no-any-return]


def stored_messages(db: Database, conversation_id: str) -> list[tuple[Any, ...]]:
    """Every stored column of every message that the archive must keep."""
    with db.session() as session:
        rows = session.execute(
            select(
                Message.id,
                Message.seq,
                Message.role,
                Message.content,
                Message.excluded,
                Message.created_at,
                Message.tool_calls,
                Message.tool_call_id,
                Message.meta,
                *(getattr(Message, c) for c in TOKEN_COLUMNS.values()),
            )
            .where(Message.conversation_id == conversation_id)
            .order_by(Message.seq)
        ).all()
    return [tuple(r) for r in rows]
