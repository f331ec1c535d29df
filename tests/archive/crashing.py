"""Helpers for the ARCH-2 crash proof (``test_crash_archive.py``, ``test_crash_restore.py``).

Kill the process after every step of archive and of restore.

For each step the operation runs in a forked child process that ends itself abruptly right after
that step (``os._exit`` through the archiver's documented ``on_step`` seam — no mocks).  The
parent then shows the conversation is recoverable — still live with every message intact, or
archived, readable and restorable with every message intact — and that repeating the
interrupted operation completes it.  Storage is the deployment default for the backend
(files on SQLite, database blobs on PostgreSQL).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.archive import crash_worker
from tests.archive.crash_worker import CRASHED
from tests.exchange.builders import stored_messages

from chatmem.settings import Settings
from chatmem.store.archive import ARCHIVE_STEPS, RESTORE_STEPS, Archiver
from chatmem.store.db import Database
from chatmem.store.tables.conversations import Conversation

WORKER = Path(__file__).with_name("crash_worker.py")
REPO = Path(__file__).resolve().parents[2]


def steps_for(operation: str, storage: str) -> list[str]:
    steps = list(ARCHIVE_STEPS if operation == "archive" else RESTORE_STEPS)
    if storage == "database":  # no file to rename: the blob is written inside the commit
        steps = [s for s in steps if s != "renamed"]
    return steps


def run_until_crash(
    db: Database, settings: Settings, storage: str, operation: str, user: str, cid: str, step: str
) -> None:
    """Fork; the child runs the operation and dies right after ``step``.  Forking (rather than
    a fresh interpreter) keeps 17 real process deaths fast; the child opens its own database
    connections and exits with ``os._exit``, so nothing of the parent's is touched."""
    args = (db.url, str(settings.state_dir), storage, operation, user, cid, step)
    if not hasattr(os, "fork"):  # pragma: no cover - Windows: a fresh interpreter instead
        completed = subprocess.run([sys.executable, str(WORKER), *args], cwd=REPO, timeout=120)
        assert completed.returncode == CRASHED
        return
    pid = os.fork()
    if pid == 0:  # the child: never return into pytest
        try:
            os._exit(crash_worker.run(*args))
        except BaseException:
            os._exit(3)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == CRASHED, f"{operation} did not stop after {step}"


def is_archived(db: Database, cid: str) -> bool:
    with db.session() as session:
        conversation = session.get(Conversation, cid)
        assert conversation is not None
        return conversation.archived_at is not None


def assert_recoverable(
    db: Database, archiver: Archiver, user: str, cid: str, rows: list, doc: list
) -> None:
    """Live and whole, or archived with a readable copy whose restore is whole."""
    if not is_archived(db, cid):
        assert stored_messages(db, cid) == rows
        return
    assert stored_messages(db, cid) == []
    read = archiver.read(user, cid)
    assert [m["id"] for m in read["messages"]] == [m["id"] for m in doc[0]["messages"]]
    assert [m["content"] for m in read["messages"]] == [m["content"] for m in doc[0]["messages"]]
