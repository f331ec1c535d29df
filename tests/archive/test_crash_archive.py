"""ARCH-2 proof, archive side: see ``crashing.py`` for the method."""

from __future__ import annotations

from tests.archive.crashing import assert_recoverable, is_archived, run_until_crash, steps_for
from tests.exchange.builders import exported, make_user, rich_conversation, stored_messages

from chatmem.settings import Settings
from chatmem.store.archive import ARCHIVE_STEPS, RESTORE_STEPS, Archiver, storage_for
from chatmem.store.db import Database


def test_archive_steps_are_the_documented_ones() -> None:
    assert ARCHIVE_STEPS == ("snapshot", "written", "verified", "renamed", "committed")
    assert RESTORE_STEPS == ("read", "verified", "committed", "removed")


def test_a_crash_after_any_archive_step_loses_nothing(db: Database, settings: Settings) -> None:
    """ARCH-2: archive killed after each step → recoverable; archiving again completes."""
    storage = storage_for(settings, db)
    archiver = Archiver(db, settings.state_dir, storage=storage)
    user = make_user(db, "alice")
    for step in steps_for("archive", storage):
        cid = rich_conversation(db, user, title=f"crash at {step}", turns=3)
        rows, doc = stored_messages(db, cid), exported(db, [cid])
        run_until_crash(db, settings, storage, "archive", user, cid, step)
        assert is_archived(db, cid) == (step == "committed"), step
        assert_recoverable(db, archiver, user, cid, rows, doc)
        if step != "committed":  # a half-written or uncommitted copy is never visible
            assert archiver.search(user) == ([], 0)
            if step in ("snapshot", "written", "verified"):
                assert not archiver.path_for(user, cid).exists()
        archiver.archive(user, cid)  # the repeated operation completes
        assert is_archived(db, cid) and stored_messages(db, cid) == []
        archiver.restore(user, cid)
        assert stored_messages(db, cid) == rows, step
        assert exported(db, [cid]) == doc
        assert not archiver.path_for(user, cid).exists()
