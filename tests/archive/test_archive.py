"""ARCH-1: archive, search by title, read without change, restore, delete for good."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from sqlalchemy import func, select
from tests.exchange.builders import (
    exported,
    make_user,
    rich_conversation,
    stored_messages,
    user_row,
)

from chatmem.errors import ArchiveDamaged, NotFound
from chatmem.settings import Settings
from chatmem.store.archive import Archiver, storage_for
from chatmem.store.conversations import list_conversations
from chatmem.store.db import Database
from chatmem.store.tables.archives import Archive
from chatmem.store.tables.conversations import File, Message, Summary

STORAGES = ["file", "database"]


def live_rows(db: Database, cid: str) -> int:
    with db.session() as session:
        return sum(
            session.scalar(select(func.count()).select_from(m).where(m.conversation_id == cid)) or 0
            for m in (Message, Summary, File)
        )


@pytest.fixture(params=STORAGES)
def archiver(request: pytest.FixtureRequest, db: Database, settings: Settings) -> Archiver:
    return Archiver(db, settings.state_dir, storage=request.param)


def test_auto_storage_is_files_on_sqlite_and_the_database_on_postgresql(
    db: Database, settings: Settings
) -> None:
    assert storage_for(settings, db) == ("file" if db.is_sqlite else "database")
    assert storage_for(settings.model_copy(update={"archive_storage": "file"}), db) == "file"


def test_archive_moves_the_conversation_out_of_the_list_and_restore_brings_it_back_whole(
    db: Database, archiver: Archiver
) -> None:
    """ARCH-1: archived conversations leave the list; restore keeps every message and count."""
    alice = make_user(db, "alice")
    cid = rich_conversation(db, alice, turns=4)
    keep = rich_conversation(db, alice, title="Stays live")
    before_doc = exported(db, [cid])
    before_rows = stored_messages(db, cid)

    entry = archiver.archive(alice, cid)
    assert (entry.id, entry.title, entry.message_count) == (cid, "Kitchen plans", len(before_rows))
    assert entry.stored_bytes < entry.raw_bytes
    assert live_rows(db, cid) == 0
    with db.session() as session:
        listed = [c.id for c in list_conversations(session, user_row(session, alice)).items]
        assert listed == [keep]
        assert [
            c.id for c in list_conversations(session, user_row(session, alice), q="kitchen").items
        ] == [keep]
    path = archiver.path_for(alice, cid)
    assert path.exists() == (archiver.storage == "file")
    if archiver.storage == "file":
        assert path.name == f"{cid}.json.zst" and path.read_bytes()[:4] == b"\x28\xb5\x2f\xfd"

    archiver.restore(alice, cid)
    assert stored_messages(db, cid) == before_rows  # ids, seq, content, times, meta, token counts
    assert exported(db, [cid]) == before_doc
    assert not path.exists()
    with db.session() as session:
        assert session.scalar(select(func.count()).select_from(Archive)) == 0


def test_an_archived_conversation_reads_without_change(db: Database, archiver: Archiver) -> None:
    alice = make_user(db, "alice")
    cid = rich_conversation(db, alice)
    (before,) = exported(db, [cid])
    archiver.archive(alice, cid)
    path = archiver.path_for(alice, cid)
    stamp = path.read_bytes() if path.exists() else b""
    first = archiver.read(alice, cid)
    second = archiver.read(alice, cid)
    assert first == second
    assert first.pop("archived_at")
    first.pop("updated_at"), before.pop("updated_at")
    assert first == before
    assert (path.read_bytes() if path.exists() else b"") == stamp
    assert archiver.search(alice)[0][0].id == cid  # still archived


def test_the_archive_is_searched_by_title_only_for_its_owner(
    db: Database, archiver: Archiver
) -> None:
    alice, mallory = make_user(db, "alice"), make_user(db, "mallory")
    wanted = rich_conversation(db, alice, title="Garden 100% plan")
    other = rich_conversation(db, alice, title="Taxes")
    foreign = rich_conversation(db, mallory, title="Garden too")
    for owner, cid in ((alice, wanted), (alice, other), (mallory, foreign)):
        archiver.archive(owner, cid)
    items, total = archiver.search(alice, "garden")
    assert [i.id for i in items] == [wanted] and total == 1
    assert [i.id for i in archiver.search(alice, "100%")[0]] == [wanted]
    assert [i.id for i in archiver.search(alice, "0_")[0]] == []
    assert {i.id for i in archiver.search(alice)[0]} == {wanted, other}
    page, total = archiver.search(alice, limit=1, offset=1)
    assert len(page) == 1 and total == 2


def test_foreign_and_live_ids_are_not_found(db: Database, archiver: Archiver) -> None:
    """STORE-1: another user's id answers exactly like a missing one."""
    alice, mallory = make_user(db, "alice"), make_user(db, "mallory")
    cid = rich_conversation(db, alice)
    live = rich_conversation(db, alice, title="live")
    with pytest.raises(NotFound):
        archiver.archive(mallory, cid)
    archiver.archive(alice, cid)
    for call in (archiver.read, archiver.restore, archiver.delete):
        with pytest.raises(NotFound):
            call(mallory, cid)
    for call in (archiver.read, archiver.delete, archiver.require_archived):
        with pytest.raises(NotFound):
            call(alice, live)
    assert archiver.search(mallory)[0] == []
    assert archiver.read(alice, cid)["id"] == cid  # unchanged by the attempts


def test_permanent_delete_removes_the_archive_and_the_conversation(
    db: Database, archiver: Archiver
) -> None:
    alice = make_user(db, "alice")
    cid = rich_conversation(db, alice)
    archiver.archive(alice, cid)
    archiver.delete(alice, cid)
    assert not archiver.path_for(alice, cid).exists()
    assert archiver.search(alice) == ([], 0)
    with pytest.raises(NotFound):
        archiver.read(alice, cid)


def test_a_damaged_archive_is_refused_and_kept(db: Database, settings: Settings) -> None:
    """ARCH-2: nothing is restored from a copy that fails its hash check."""
    archiver = Archiver(db, settings.state_dir, storage="file")
    alice = make_user(db, "alice")
    cid = rich_conversation(db, alice)
    archiver.archive(alice, cid)
    path = archiver.path_for(alice, cid)
    good = path.read_bytes()
    path.write_bytes(good[:-8] + bytes(8))
    with pytest.raises(ArchiveDamaged):
        archiver.restore(alice, cid)
    assert live_rows(db, cid) == 0 and archiver.require_archived(alice, cid).id == cid
    path.write_bytes(good)
    archiver.restore(alice, cid)
    assert live_rows(db, cid) > 0


def test_repeated_operations_are_harmless(db: Database, archiver: Archiver) -> None:
    alice = make_user(db, "alice")
    cid = rich_conversation(db, alice)
    first = archiver.archive(alice, cid)
    assert archiver.archive(alice, cid) == first
    archiver.restore(alice, cid)
    rows = stored_messages(db, cid)
    archiver.restore(alice, cid)
    assert stored_messages(db, cid) == rows


def test_archived_file_lives_under_the_state_dir_per_user(db: Database, settings: Settings) -> None:
    archiver = Archiver(db, settings.state_dir, storage="file")
    alice = make_user(db, "alice")
    cid = rich_conversation(db, alice)
    archiver.archive(alice, cid)
    path = Path(settings.state_dir) / "archive" / alice / f"{cid}.json.zst"
    assert path.exists()
    assert not list(path.parent.glob("*.tmp"))
    with db.session() as session:
        record = session.get(Archive, cid)
        assert record is not None and record.storage == "file" and len(record.sha256) == 64
        assert (
            record.sha256 != hashlib.sha256(path.read_bytes()).hexdigest()
        )  # hash of the raw document


def test_a_running_turn_blocks_archiving(db: Database, settings: Settings) -> None:
    from chatmem.errors import TurnRunning
    from chatmem.store.tables.runs import Run

    archiver = Archiver(db, settings.state_dir, storage="file")
    alice = make_user(db, "alice")
    cid = rich_conversation(db, alice)
    with db.session() as session:
        run = Run(conversation_id=cid, user_id=alice, status="running")
        session.add(run)
        session.flush()
        run_id = run.id
    rows = stored_messages(db, cid)
    with pytest.raises(TurnRunning):
        archiver.archive(alice, cid)
    assert stored_messages(db, cid) == rows
    with db.session() as session:
        finished = session.get(Run, run_id)
        assert finished is not None
        finished.status = "completed"
    archiver.archive(alice, cid)
    assert live_rows(db, cid) == 0


def test_a_message_arriving_mid_archive_is_never_lost(db: Database, settings: Settings) -> None:
    """ARCH-2: the commit checks the conversation is unchanged since the snapshot."""
    from chatmem.errors import Conflict
    from chatmem.store import messages
    from chatmem.store.tables.conversations import Conversation

    alice = make_user(db, "alice")
    cid = rich_conversation(db, alice)

    def append_meanwhile(step: str) -> None:
        if step == "archive:renamed":
            with db.session() as session:
                conversation = session.get(Conversation, cid)
                assert conversation is not None
                messages.append_message(session, conversation, "user", "one more thing")

    racing = Archiver(db, settings.state_dir, storage="file", on_step=append_meanwhile)
    with pytest.raises(Conflict):
        racing.archive(alice, cid)
    assert stored_messages(db, cid)[-1][3] == "one more thing"
    archiver = Archiver(db, settings.state_dir, storage="file")
    archiver.archive(alice, cid)
    assert archiver.read(alice, cid)["messages"][-1]["content"] == "one more thing"


def test_export_carries_archived_conversations_and_import_archives_them_again(
    db: Database, settings: Settings, tmp_path: Path
) -> None:
    """STORE-5 + ARCH-1: "all conversations" includes archived ones, whole, and they arrive
    archived on the other server."""
    import io
    import json

    from tests.exchange.builders import open_db

    from chatmem.formats.source import ImportSource
    from chatmem.store.archive import archive_imported
    from chatmem.store.exchange.exporter import export_conversation_ids, export_stream
    from chatmem.store.exchange.importer import import_source

    archiver = Archiver(db, settings.state_dir, storage="file")
    alice = make_user(db, "alice")
    cid = rich_conversation(db, alice, title="Old project")
    live = rich_conversation(db, alice, title="Current")
    (before,) = exported(db, [cid])
    archiver.archive(alice, cid)
    with db.session() as session:
        user = user_row(session, alice)
        data = b"".join(
            export_stream(session, export_conversation_ids(session, user), archived=archiver.read)
        )
    conversations = {c["id"]: c for c in json.loads(data)["conversations"]}
    assert set(conversations) == {cid, live}
    assert conversations[cid]["archived"] is True
    assert conversations[cid]["messages"] == before["messages"]
    assert "archived" not in conversations[live]

    other = open_db(f"sqlite:///{tmp_path / 'elsewhere.db'}")
    try:
        bob = make_user(other, "bob")
        with other.session() as session:
            result = import_source(session, user_row(session, bob), ImportSource(io.BytesIO(data)))
        assert result.archived_ids == [cid]
        elsewhere = Archiver(other, tmp_path / "elsewhere-state", storage="file")
        assert archive_imported(elsewhere, bob, result.archived_ids) == 1
        assert [i.id for i in elsewhere.search(bob)[0]] == [cid]
        assert elsewhere.read(bob, cid)["messages"] == before["messages"]
    finally:
        other.dispose()


def test_a_restore_beyond_the_conversation_quota_is_refused_and_changes_nothing(
    db: Database, settings: Settings
) -> None:
    """STORE-4: archived conversations do not count; bringing one back must fit."""
    from chatmem.errors import QuotaExceeded
    from chatmem.store.quotas import Limits

    archiver = Archiver(db, settings.state_dir, storage="file")
    alice = make_user(db, "alice")
    cid = rich_conversation(db, alice)
    archiver.archive(alice, cid)
    rich_conversation(db, alice, title="fills the quota")
    with pytest.raises(QuotaExceeded):
        archiver.restore(alice, cid, limits=Limits(conversations=1))
    assert live_rows(db, cid) == 0 and archiver.require_archived(alice, cid).id == cid
    archiver.restore(alice, cid, limits=Limits(conversations=2))
    assert live_rows(db, cid) > 0
