"""STORE-7 from the index (issue 16): titles and content are found through full-text
indexes, kept in step with every write; search of one conversation's messages."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from alembic import command
from sqlalchemy import Connection, delete, text, update

from chatmem.formats.source import ImportSource
from chatmem.store import accounts
from chatmem.store.archive import Archiver
from chatmem.store.conversations import create_conversation, create_folder, list_conversations
from chatmem.store.db import Database
from chatmem.store.exchange.importer import import_source
from chatmem.store.messages import append_message
from chatmem.store.migrations import alembic_config
from chatmem.store.quotas import UNLIMITED
from chatmem.store.search import BULK_INDEX_ROWS, insert_messages, search_messages
from chatmem.store.tables.accounts import User
from chatmem.store.tables.conversations import Conversation
from chatmem.store.types import new_id, utcnow


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


def test_a_search_pages_within_the_users_folder_and_cursor(db: Database) -> None:
    """The search's one statement (PostgreSQL: the hits, then each one's conversation) keeps
    every condition of the list: the user's own, not archived, the folder, the cursor, the
    offset — and each conversation once, however many of its messages match."""
    with db.session() as session:
        ann = accounts.create_user(session, "ann")
        bob = accounts.create_user(session, "bob")
        trips = create_folder(session, ann, "Trips", UNLIMITED)
        made = []
        for i in range(7):
            chat = create_conversation(
                session, ann, UNLIMITED, title=f"Chat {i}", folder_id=trips.id if i % 2 else None
            )
            append_message(session, chat, "user", f"geyser number {i}")
            append_message(session, chat, "assistant", "Another geyser.")
            made.append(chat)
        gone = create_conversation(session, ann, UNLIMITED, title="Archived geyser")
        session.execute(
            update(Conversation).where(Conversation.id == gone.id).values(archived_at=utcnow())
        )
        theirs = create_conversation(session, bob, UNLIMITED, title="Bob's")
        append_message(session, theirs, "user", "geyser")
        ann_id, folder_id = ann.id, trips.id
    newest_first = [f"Chat {i}" for i in reversed(range(7))]
    with db.session() as session:
        user = session.get(User, ann_id)
        assert user is not None
        seen: list[str] = []
        cursor = None
        while True:
            page = list_conversations(session, user, q="geyser", limit=3, cursor=cursor)
            seen += [c.title for c in page.items]
            cursor = page.next_cursor
            if cursor is None:
                break
        assert seen == newest_first
        in_folder = list_conversations(session, user, q="geyser", folder_id=folder_id)
        assert [c.title for c in in_folder.items] == ["Chat 5", "Chat 3", "Chat 1"]
        later = list_conversations(session, user, q="geyser num", limit=2, offset=2)
        assert [c.title for c in later.items] == newest_first[2:4]
        assert later.next_cursor is not None
        assert list_conversations(session, user, q="geyser number 3").items[0].title == "Chat 3"
        assert list_conversations(session, user, q="bob").items == []


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


def _chatgpt_export(conversations: int, turns: int) -> bytes:
    """A ChatGPT export: conversation ``i``'s messages say ``note<i>`` (and the even ones
    ``volcano``)."""
    items = []
    for i in range(conversations):
        mapping: dict[str, dict[str, object]] = {"root": {"message": None, "children": []}}
        parent = "root"
        for turn in range(turns):
            words = f"note{i} turn {turn}" + (" volcano" if i % 2 == 0 else "")
            mapping[f"n{turn}"] = {
                "parent": parent,
                "children": [],
                "message": {
                    "id": f"m{i}-{turn}",
                    "author": {"role": "user" if turn % 2 == 0 else "assistant"},
                    "content": {"content_type": "text", "parts": [words]},
                },
            }
            parent = f"n{turn}"
        items.append(
            {"id": f"c{i}", "title": f"Chat {i}", "current_node": parent, "mapping": mapping}
        )
    return json.dumps(items).encode()


def _index_is_exact(db: Database) -> None:
    """SQLite: the FTS5 index holds exactly the table's rows, and the trigger is back."""
    if not db.is_sqlite:
        return
    with db.engine.begin() as conn:
        conn.exec_driver_sql(  # rank 1: checked against the table's rows too
            "INSERT INTO messages_fts(messages_fts, rank) VALUES ('integrity-check', 1)"
        )
        assert (
            conn.exec_driver_sql(
                "SELECT count(*) FROM sqlite_master WHERE type = 'trigger' AND name = 'messages_fts_ai'"
            ).scalar()
            == 1
        )


def test_a_bulk_import_is_indexed_exactly(db: Database) -> None:
    """Imports insert messages in batches with the index filled in one statement per batch
    (issue 16): every imported message is found, nothing else, and the index follows later
    writes (the per-message path is back)."""
    conversations, turns = 40, 10
    assert conversations * turns > BULK_INDEX_ROWS  # the bulk path, not the trigger's
    with db.session() as session:
        ann = accounts.create_user(session, "ann")
        before = create_conversation(session, ann, UNLIMITED, title="Before")
        append_message(session, before, "user", "A volcano written before the import.")
        ann_id, before_id = ann.id, before.id
    with db.session() as session:
        user = session.get(User, ann_id)
        assert user is not None
        result = import_source(session, user, ImportSource(io.BytesIO(_chatgpt_export(40, 10))))
    assert result.messages == conversations * turns
    _index_is_exact(db)
    volcanic = sorted(["Before", *(f"Chat {i}" for i in range(0, conversations, 2))])
    assert titles(db, ann_id, "volcano") == volcanic
    assert titles(db, ann_id, "note7 turn") == ["Chat 7"]
    assert titles(db, ann_id, "note39") == ["Chat 39"]
    with db.session() as session:  # every message of every imported conversation
        for cid in result.conversation_ids:
            assert len(search_messages(session, cid, "turn", limit=turns + 1)) == turns
    with db.session() as session:
        chat = session.get(Conversation, result.conversation_ids[3])
        assert chat is not None
        append_message(session, chat, "user", "A geyser, later.")
        session.execute(delete(Conversation).where(Conversation.id == before_id))
    assert titles(db, ann_id, "geyser") == ["Chat 3"]
    assert titles(db, ann_id, "volcano") == volcanic[1:]  # "Before" went with its messages
    _index_is_exact(db)


def test_a_restored_archive_is_indexed_exactly(db: Database, tmp_path: Path) -> None:
    """A restore writes its messages in batches as an import does (the index per batch)."""
    with db.session() as session:
        ann = accounts.create_user(session, "ann")
        chat = create_conversation(session, ann, UNLIMITED, title="Long")
        for i in range(BULK_INDEX_ROWS + 10):
            append_message(session, chat, "user", f"fumarole {i}")
        ann_id, chat_id = ann.id, chat.id
    archiver = Archiver(db, tmp_path / "state", storage="file")
    archiver.archive(ann_id, chat_id)
    assert titles(db, ann_id, "fumarole") == []
    archiver.restore(ann_id, chat_id)
    _index_is_exact(db)
    assert titles(db, ann_id, "fumarole 17") == ["Long"]
    with db.session() as session:
        found = search_messages(session, chat_id, "fumarole", limit=BULK_INDEX_ROWS + 20)
        assert len(found) == BULK_INDEX_ROWS + 10


def test_a_bulk_insert_rolled_back_leaves_index_and_trigger_as_they_were(db: Database) -> None:
    with db.session() as session:
        ann = accounts.create_user(session, "ann")
        chat = create_conversation(session, ann, UNLIMITED, title="Chat")
        ann_id, chat_id = ann.id, chat.id
    rows = [
        {
            "id": new_id(),
            "conversation_id": chat_id,
            "seq": seq,
            "role": "user",
            "content": f"volcano {seq}",
            "created_at": utcnow(),
            "tool_calls": None,
            "tool_call_id": None,
            "excluded": False,
            "hidden": False,
            "meta": None,
            "tokens_estimate": 3,
            "tokens_o200k": 3,
            "tokens_cl100k": 3,
        }
        for seq in range(1, BULK_INDEX_ROWS + 2)
    ]
    with pytest.raises(RuntimeError), db.session() as session:
        insert_messages(session.connection(), rows)
        raise RuntimeError("the import failed later")
    _index_is_exact(db)
    assert titles(db, ann_id, "volcano") == []
    with db.session() as session:
        insert_messages(session.connection(), rows)
    _index_is_exact(db)
    assert titles(db, ann_id, "volcano") == ["Chat"]


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
