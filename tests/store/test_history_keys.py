"""The history index (API-1, issue 29): the keys a headerless OpenAI request finds its
conversation by — the chains (pure) and the store's reads and writes."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

import pytest
from sqlalchemy import update

from chatmem.errors import InvalidInput
from chatmem.formats.records import ImportedConversation, ImportedMessage
from chatmem.store import accounts
from chatmem.store.conversations import create_conversation
from chatmem.store.db import Database
from chatmem.store.exchange.importer import import_conversations
from chatmem.store.history_keys import (
    backfill,
    candidates,
    client_conversation,
    conversation_keys,
    index_conversation,
    lookup_keys,
    set_client_key,
    set_view_keys,
    view_keys,
)
from chatmem.store.messages import insert_message
from chatmem.store.quotas import UNLIMITED
from chatmem.store.tables.conversations import Conversation
from chatmem.store.types import utcnow


@dataclass(frozen=True)
class M:
    role: str
    content: str
    tool_call_id: str | None = None


HI = [M("user", "Hi"), M("assistant", "Hello!")]


def test_a_new_chat_looks_up_nothing() -> None:
    assert lookup_keys([M("user", "Hi")]) == []
    assert lookup_keys([M("system", "Be brief."), M("user", "Hi")]) == []


def test_a_continuing_request_finds_the_view_it_repeats() -> None:
    stored = view_keys(HI)  # answered: only ``seen``
    assert set(stored) == {"seen"}
    assert stored["seen"] in lookup_keys([*HI, M("user", "More?")])


def test_an_answer_after_the_keys_is_found_by_asked() -> None:
    asked = view_keys([*HI, M("user", "More?")])  # written at admission, before the answer
    later = [*HI, M("user", "More?"), M("assistant", "Sure."), M("user", "And?")]
    assert asked["asked"] in lookup_keys(later)
    # ... and a failed answer's retry (the same request again) by ``seen``.
    assert asked["seen"] in lookup_keys([*HI, M("user", "More?")])


def test_chains_compare_what_same_as_compares() -> None:
    keys = lookup_keys([M("user", " Hi\n"), M("assistant", "Hello! "), M("user", "x")])
    assert view_keys(HI)["seen"] in keys
    assert view_keys([M("user", "Hi"), M("assistant", "Hello?")])["seen"] not in keys
    assert view_keys([M("system", "Hi"), M("assistant", "Hello!")])["seen"] not in keys
    one = [M("user", "q"), M("assistant", ""), M("tool", "r", "call_1"), M("assistant", "a")]
    two = [M("user", "q"), M("assistant", ""), M("tool", "r", "call_2"), M("assistant", "a")]
    assert view_keys(one) != view_keys(two)


def test_a_client_key_is_checked() -> None:
    with pytest.raises(InvalidInput):
        set_client_key(None, "u", "c", "x" * 201)  # type: ignore[arg-type]
    with pytest.raises(InvalidInput):
        set_client_key(None, "u", "c", "tab\there")  # type: ignore[arg-type]


def _chat(db: Database, user: accounts.Account, *texts: str, ago: int = 0) -> str:
    with db.session() as session:
        cid = create_conversation(session, user, UNLIMITED).id
        for i, text in enumerate(texts):
            insert_message(session, cid, "user" if i % 2 == 0 else "assistant", text)
        when = utcnow() - timedelta(minutes=ago)
        session.execute(
            update(Conversation).where(Conversation.id == cid).values(last_active_at=when)
        )
        index_conversation(session, cid)
        return cid


def test_candidates_are_the_users_most_recently_active_first(db: Database) -> None:
    with db.session() as session:
        ann = accounts.create_user(session, "ann")
        bob = accounts.create_user(session, "bob")
    older = _chat(db, ann, "Hi", "Hello!", ago=10)
    newer = _chat(db, ann, "Hi", "Hello!", ago=1)
    _chat(db, bob, "Hi", "Hello!")
    _chat(db, ann, "Hi", "Other.")
    keys = lookup_keys([*HI, M("user", "More?")])
    with db.session() as session:
        assert candidates(session, ann.id, keys) == [newer, older]
        session.execute(
            update(Conversation).where(Conversation.id == newer).values(archived_at=utcnow())
        )
        assert candidates(session, ann.id, keys) == [older]


def test_a_client_key_names_one_conversation_per_user(db: Database) -> None:
    with db.session() as session:
        ann = accounts.create_user(session, "ann")
        bob = accounts.create_user(session, "bob")
    first, second = _chat(db, ann, "a"), _chat(db, ann, "b")
    bobs = _chat(db, bob, "c")
    with db.session() as session:
        set_client_key(session, ann.id, first, "chat-1")
        set_client_key(session, bob.id, bobs, "chat-1")
        assert client_conversation(session, ann.id, "chat-1") == first
        assert client_conversation(session, bob.id, "chat-1") == bobs
        set_client_key(session, ann.id, second, "chat-1")  # the key follows an edited branch
        assert client_conversation(session, ann.id, "chat-1") == second
        assert "client" not in conversation_keys(session, first)
        assert client_conversation(session, ann.id, "chat-2") is None


def test_index_conversation_rewrites_stale_keys_and_backfill_covers_all(db: Database) -> None:
    with db.session() as session:
        ann = accounts.create_user(session, "ann")
    cid = _chat(db, ann, "Hi", "Hello!")
    with db.session() as session:
        set_view_keys(session, ann.id, cid, {"seen": "s:stale"})
        assert index_conversation(session, cid) == view_keys(HI)
        set_view_keys(session, ann.id, cid, {})
        assert backfill(session.connection()) == 1
        assert conversation_keys(session, cid) == view_keys(HI)


def test_an_imported_conversation_is_indexed(db: Database) -> None:
    """An OpenAI client whose chat was imported (say, from Open WebUI) continues it."""
    with db.session() as session:
        ann = accounts.create_user(session, "ann")
        result = import_conversations(
            session,
            ann,
            [
                ImportedConversation(
                    source_key="openwebui:chat-1",
                    id="chat-1",
                    title="Greeting",
                    messages=(
                        ImportedMessage("m1", "user", "Hi"),
                        ImportedMessage("m2", "assistant", "Hello!"),
                    ),
                )
            ],
            fmt="openwebui",
        )
        session.commit()
    assert result.imported == 1
    with db.session() as session:
        (found,) = candidates(session, ann.id, lookup_keys([*HI, M("user", "More?")]))
        assert session.get(Conversation, found).title == "Greeting"  # type: ignore[union-attr]
