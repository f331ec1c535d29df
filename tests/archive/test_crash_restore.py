"""ARCH-2 proof, restore side: see ``crashing.py`` for the method."""

from __future__ import annotations

from tests.archive.crashing import assert_recoverable, is_archived, run_until_crash, steps_for
from tests.exchange.builders import exported, make_user, rich_conversation, stored_messages

from chatmem.settings import Settings
from chatmem.store.archive import Archiver, storage_for
from chatmem.store.db import Database


def test_a_crash_after_any_restore_step_loses_nothing(db: Database, settings: Settings) -> None:
    """ARCH-2: restore killed after each step → recoverable; restoring again completes."""
    storage = storage_for(settings, db)
    archiver = Archiver(db, settings.state_dir, storage=storage)
    user = make_user(db, "alice")
    for step in steps_for("restore", storage):
        cid = rich_conversation(db, user, title=f"crash at {step}", turns=3)
        rows, doc = stored_messages(db, cid), exported(db, [cid])
        archiver.archive(user, cid)
        run_until_crash(db, settings, storage, "restore", user, cid, step)
        assert is_archived(db, cid) == (step in ("read", "verified")), step
        assert_recoverable(db, archiver, user, cid, rows, doc)
        archiver.restore(user, cid)  # the repeated operation completes (and tidies the file)
        assert not is_archived(db, cid)
        assert stored_messages(db, cid) == rows, step
        assert exported(db, [cid]) == doc
        assert not archiver.path_for(user, cid).exists()
        assert not list(archiver.root.rglob("*.tmp"))
