"""STORE-7 from the index (issue 16): titles and content are found through full-text
indexes, kept in step with every write; search of one conversation's messages."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from alembic import command
from sqlalchemy import Connection, delete, text, update

from chatmem.store import accounts
from chatmem.store.conversations import create_conversation, list_conversations
from chatmem.store.db import Database
from chatmem.store.messages import append_message
from chatmem.store.migrations import alembic_config
from chatmem.store.quotas import UNLIMITED
from chatmem.store.search import search_messages
from chatmem.store.tables.accounts import User
from chatmem.store.tables.conversations import Conversation
from chatmem.store.types import utcnow


@pytest.fixture
def db(database_url: str) -> Iterator[Database]:
    database = Database(database_url)
    database.migrate()
    yield database
    database.dispose()


def titles(db: Database, user_id: str, q: str) -> list[str]:
    with db.session() as session:
        user = session.get(User, user_id)
        assert user is not None
        return sorted(c.title for c in list_conversations(session, user, q=q).items)


def test_titles_are_found_by_words_and_follow_renames_and_deletes(db: Database) -> None:
    with db.session() as session:
        ann = accounts.create_user(session, "ann")
        bob = accounts.create_user(session, "bob")
        trip = create_conversation(session, ann, UNLIMITED, title="Trip to Reykjavík")
        create_conversation(session, ann, UNLIMITED, title="Quarterly report")
        create_conversation(session, bob, UNLIMITED, title="Trip to Oslo")
        ann_id, trip_id = ann.id, trip.id
    assert titles(db, ann_id, "trip") == ["Trip to Reykjavík"]  # not bob's
    assert titles(db, ann_id, "reykjav") == ["Trip to Reykjavík"]  # the last word a prefix
    assert titles(db, ann_id, "to reykj") == ["Trip to Reykjavík"]  # every word
    assert titles(db, ann_id, "QUARTERLY") == ["Quarterly report"]
    assert titles(db, ann_id, "oslo") == []
    with db.session() as session:
        session.execute(
            update(Conversation).where(Conversation.id == trip_id).values(title="Lisbon weekend")
        )
    assert titles(db, ann_id, "trip") == []
    assert titles(db, ann_id, "lisbon") == ["Lisbon weekend"]
    with db.session() as session:
        session.execute(
            update(Conversation).where(Conversation.id == trip_id).values(archived_at=utcnow())
        )
    assert titles(db, ann_id, "lisbon") == []  # archived ones are left out
    with db.session() as session:
        session.execute(delete(Conversation).where(Conversation.id == trip_id))
        session.execute(delete(User).where(User.id == ann_id))  # cascades to the rest
    with db.session() as session:
        create_conversation(session, bob, UNLIMITED, title="Lisbon again")
    assert titles(db, bob.id, "lisbon") == ["Lisbon again"]


def test_content_and_title_hits_are_one_ordered_page(db: Database) -> None:
    with db.session() as session:
        ann = accounts.create_user(session, "ann")
        by_title = create_conversation(session, ann, UNLIMITED, title="Volcano trip")
        by_content = create_conversation(session, ann, UNLIMITED, title="Misc")
        append_message(session, by_content, "user", "Which volcano erupted in Iceland?")
        both = create_conversation(session, ann, UNLIMITED, title="Volcano facts", pinned=True)
        append_message(session, both, "user", "volcano volcano")
        ann_id = ann.id
    with db.session() as session:
        user = session.get(User, ann_id)
        assert user is not None
        page = list_conversations(session, user, q="volcano", limit=2)
        rest = list_conversations(session, user, q="volcano", limit=2, cursor=page.next_cursor)
    # pinned first, then the most recently active; each conversation once
    assert [c.title for c in page.items] == ["Volcano facts", "Misc"]
    assert [c.title for c in rest.items] == ["Volcano trip"]
    assert rest.next_cursor is None
    assert titles(db, ann_id, "iceland volc") == ["Misc"]
    assert titles(db, ann_id, "!!!") == []  # no word, no match
    del by_title


def test_search_messages_of_one_conversation(db: Database) -> None:
    with db.session() as session:
        ann = accounts.create_user(session, "ann")
        one = create_conversation(session, ann, UNLIMITED, title="a")
        other = create_conversation(session, ann, UNLIMITED, title="b")
        append_message(session, one, "user", "We agreed the budget is 40k.")
        append_message(session, one, "assistant", "Budget noted: 40k, budget budget.")
        append_message(session, one, "user", "Unrelated words.")
        append_message(session, other, "user", "The budget elsewhere.")
        one_id = one.id
    with db.session() as session:
        found = search_messages(session, one_id, "budget", limit=10)
        assert [m.content for m in found] == [
            "Budget noted: 40k, budget budget.",  # more of the word ranks first
            "We agreed the budget is 40k.",
        ]
        assert [m.content for m in search_messages(session, one_id, "agreed budg")] == [
            "We agreed the budget is 40k."
        ]
        assert len(search_messages(session, one_id, "budget", limit=1)) == 1
        assert search_messages(session, one_id, "...") == []


def test_titles_written_before_the_migration_are_found(tmp_path: Path) -> None:
    """0011_search_index indexes the titles already there (SQLite: the FTS5 table's
    backfill; PostgreSQL builds its index over the table anyway).  Upgraded to this
    revision alone: the test is about this migration, not the others of the head."""
    db = Database(f"sqlite:///{tmp_path / 'old.db'}")
    with db.engine.begin() as conn:
        config = alembic_config()
        config.attributes["connection"] = conn
        command.upgrade(config, "0007_attachments_recount")
        _insert(conn, "users", id="u1", name="ann")
        _insert(conn, "conversations", id="c1", user_id="u1", title="Old volcano notes")
        command.upgrade(config, "0011_search_index")
        found = conn.execute(
            text(
                "SELECT r.conversation_id FROM conversations_fts JOIN conversations_fts_rowids "
                "AS r ON r.num = conversations_fts.rowid WHERE conversations_fts MATCH 'volcano'"
            )
        ).scalars()
        assert list(found) == ["c1"]
    db.dispose()


def _insert(conn: Connection, table_name: str, /, **values: object) -> None:
    """A row as the schema of that revision has it: required columns not given are 0."""
    for _, column, kind, notnull, default, _pk in conn.exec_driver_sql(
        f"PRAGMA table_info({table_name})"
    ):
        if notnull and default is None and column not in values:
            values[column] = "2026-01-01" if "DATETIME" in kind.upper() else 0
    names = ", ".join(values)
    conn.execute(text(f"INSERT INTO {table_name} ({names}) VALUES (:{', :'.join(values)})"), values)
