"""Issue 16: a message is counted at write time with the estimate and the tokenizers profiles
use; any other exact count is counted once, when a plan first needs it, and stored."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import select

from chatmem.context import tokens as engine_tokens
from chatmem.context.values import Message as EngineMessage
from chatmem.formats.source import ImportSource
from chatmem.store import accounts, token_counts
from chatmem.store.conversations import create_conversation
from chatmem.store.db import Database
from chatmem.store.engine import load_engine_conversation
from chatmem.store.exchange.importer import import_source
from chatmem.store.messages import append_message
from chatmem.store.quotas import UNLIMITED
from chatmem.store.tables.accounts import User
from chatmem.store.tables.conversations import Message
from chatmem.store.tables.profiles import ModelProfile
from chatmem.store.types import new_id

SAMPLE = Path(__file__).parent.parent / "exchange" / "samples" / "chatgpt_conversations.json"


@pytest.fixture
def db(db: Database, monkeypatch: pytest.MonkeyPatch) -> Database:
    """The store tests' database, reading the tokenizers in use at every write (profiles
    change within a test)."""
    monkeypatch.setattr(token_counts, "IN_USE_SECONDS", 0.0)
    return db


def exact(message: Message, name: str) -> int:
    value = EngineMessage(id=message.id, role=message.role, content=message.content)  # type: ignore[arg-type]
    return engine_tokens.count_message(value, engine_tokens.get_tokenizer(name))


def stored(db: Database, cid: str) -> list[Message]:
    with db.session() as session:
        rows = session.scalars(
            select(Message).where(Message.conversation_id == cid).order_by(Message.seq)
        )
        return list(rows)


def o200k_profile(user_id: str) -> ModelProfile:
    """A profile whose tokenizer is ``o200k_base`` (so messages are counted with it)."""
    return ModelProfile(
        id=new_id(),
        user_id=user_id,
        name="gpt",
        base_url="https://api.example.com/v1",
        model="gpt-4o",
        tokenizer="o200k_base",
    )


def test_import_counts_what_profiles_use_and_a_plan_counts_the_rest_once(db: Database) -> None:
    with db.session() as session:
        user = accounts.create_user(session, "ann")
        session.add(o200k_profile(user.id))
        user_id = user.id
    with db.session() as session, SAMPLE.open("rb") as raw:
        owner = session.get(User, user_id)
        assert owner is not None
        cid = import_source(session, owner, ImportSource(raw)).conversation_ids[0]
    rows = stored(db, cid)
    assert all(r.tokens_estimate > 0 for r in rows)
    assert [r.tokens_o200k for r in rows] == [exact(r, "o200k_base") for r in rows]
    assert {r.tokens_cl100k for r in rows} == {token_counts.UNCOUNTED}  # no profile uses it

    with db.session() as session:
        planned = load_engine_conversation(session, cid, tokenizer="cl100k_base")
        assert [m.tokens for m in planned.messages] == [exact(r, "cl100k_base") for r in rows]
    rows = stored(db, cid)
    assert [r.tokens_cl100k for r in rows] == [exact(r, "cl100k_base") for r in rows]
    with db.session() as session:  # counted once: the next plan finds nothing to count
        assert token_counts.fill_uncounted(session.connection(), cid, "tokens_cl100k") == 0


def test_append_message_counts_the_estimate_when_no_profile_names_a_tokenizer(
    db: Database,
) -> None:
    with db.session() as session:
        user = accounts.create_user(session, "bob")
        conversation = create_conversation(session, user, UNLIMITED)
        append_message(session, conversation, "user", "How many tokens is this?")
        cid = conversation.id
    (row,) = stored(db, cid)
    assert row.tokens_estimate > 0
    assert (row.tokens_o200k, row.tokens_cl100k) == (token_counts.UNCOUNTED, token_counts.UNCOUNTED)
    with db.session() as session:
        (message,) = load_engine_conversation(session, cid, tokenizer="o200k_base").messages
    assert message.tokens == exact(row, "o200k_base")


def test_the_tokenizers_in_use_are_the_databases_own_answer_read_now_and_then(
    database_url: str,
) -> None:
    """One answer per database, shared by all its connections, read again only after
    ``IN_USE_SECONDS`` (an injected clock); another database has its own."""
    db, other = Database(database_url), Database(database_url)
    db.migrate()
    now = [100.0]
    db.tokenizers_in_use.clock = lambda: now[0]
    try:
        with db.session() as session:
            assert token_counts.tokenizers_in_use(session) == {"estimate"}
            user = accounts.create_user(session, "cal")
            session.add(o200k_profile(user.id))
        with db.session() as session:  # within the interval: the answer as it was
            assert token_counts.tokenizers_in_use(session) == {"estimate"}
        with other.session() as session:  # another database reads its own
            assert token_counts.tokenizers_in_use(session) == {"estimate", "o200k_base"}
        now[0] += token_counts.IN_USE_SECONDS
        with db.session() as session:
            assert token_counts.tokenizers_in_use(session) == {"estimate", "o200k_base"}
    finally:
        db.dispose()
        other.dispose()
