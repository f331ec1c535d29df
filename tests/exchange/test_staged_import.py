"""The server's import, written in short units and shown all at once
(``chatmem.store.exchange.staged``), on SQLite and PostgreSQL.

The units run through a :class:`Watched` runner — plain transactions that look, after each
unit, at what the importing user can see, or fail a chosen unit: the seam the server's
runner (the write slot, a worker thread) plugs into.
"""

from __future__ import annotations

import functools
import io
import json
import tempfile
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any, TypeVar

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session
from tests.exchange.builders import make_user, user_row

from chatmem.errors import Conflict, QuotaExceeded
from chatmem.formats.source import ImportSource
from chatmem.store.admin import all_users
from chatmem.store.db import Database
from chatmem.store.exchange.importer import ImportResult, import_source
from chatmem.store.exchange.staged import (
    STAGING_PREFIX,
    StagedImport,
    Transactions,
    read_prepared,
    replay,
    run_staged,
    sweep_stale,
)
from chatmem.store.quotas import UNLIMITED, Limits
from chatmem.store.tables.accounts import User
from chatmem.store.tables.conversations import Conversation, Folder, Message
from chatmem.store.tables.projects import Project
from chatmem.store.types import utcnow

T = TypeVar("T")
SAMPLES = Path(__file__).parent / "samples"


def native(count: int, *, folders: tuple[str, ...] = ("Work", "Home")) -> bytes:
    conversations: list[dict[str, Any]] = []
    for n in range(count):
        item: dict[str, Any] = {
            "id": f"staged-{n}",
            "title": f"Conversation {n}",
            "folder": folders[n % len(folders)] if folders else None,
            "messages": [
                {"id": f"q{n}", "role": "user", "content": f"question {n}"},
                {"id": f"a{n}", "role": "assistant", "content": f"answer {n}"},
            ],
            "files": [],
        }
        if n == 1:
            item["project"] = {"name": "Garden", "instructions": "Be brief.", "files": []}
        conversations.append(item)
    return json.dumps({"format": "chatmem.export/1", "conversations": conversations}).encode()


def seen_by(session: Session, user_id: str) -> tuple[int, int, int]:
    """The user's conversations, folders and projects (every read is scoped so)."""
    return (
        session.scalar(
            select(func.count()).select_from(Conversation).where(Conversation.user_id == user_id)
        )
        or 0,
        session.scalar(select(func.count()).select_from(Folder).where(Folder.user_id == user_id))
        or 0,
        session.scalar(select(func.count()).select_from(Project).where(Project.user_id == user_id))
        or 0,
    )


def leftovers(db: Database) -> tuple[int, int, int]:
    """Rows of any owner: conversations, messages, staging owners."""
    with db.session() as session:
        return (
            session.scalar(select(func.count()).select_from(Conversation)) or 0,
            session.scalar(select(func.count()).select_from(Message)) or 0,
            session.scalar(
                select(func.count()).select_from(User).where(User.name.startswith(STAGING_PREFIX))
            )
            or 0,
        )


class Watched(Transactions):
    """Transactions; after each write unit, what ``user_id`` sees and who the admin list
    shows.  ``fail_at``: the write unit that fails instead of running (1-based, or by the
    name of the method: ``"finish"``)."""

    def __init__(self, db: Database, user_id: str, fail_at: int | str | None = None) -> None:
        super().__init__(db)
        self.user_id = user_id
        self.fail_at = fail_at
        self.writes = 0
        self.seen: list[tuple[int, int, int]] = []
        self.listed: set[str] = set()

    def write(self, fn: Callable[[Session], T], /) -> T:
        self.writes += 1
        if self.fail_at is not None and self.fail_at in (self.writes, getattr(fn, "__name__", "")):
            raise OSError("No space left on device")
        result = super().write(fn)
        with self.db.session() as session:
            self.seen.append(seen_by(session, self.user_id))
            self.listed |= {u.name for u in all_users(session)}
        return result


def staged(
    db: Database, user_id: str, data: bytes, *, limits: Limits = UNLIMITED, unit_rows: int = 5
) -> ImportResult:
    return run_staged(
        Transactions(db),
        user_id,
        ImportSource(io.BytesIO(data)),
        limits=limits,
        unit_rows=unit_rows,
    )


def test_nothing_is_seen_until_the_last_unit_then_everything(db: Database) -> None:
    owner = make_user(db, "alice")
    watched = Watched(db, owner)
    result = run_staged(watched, owner, ImportSource(io.BytesIO(native(30))), unit_rows=7)
    assert result.imported == 30 and result.messages == 60
    # begin, at least ten writes of at most 7 rows (a conversation is 3), the finish
    assert watched.writes >= 12
    assert watched.seen[:-1] == [(0, 0, 0)] * (watched.writes - 1)
    assert watched.seen[-1] == (30, 2, 1)
    assert not any(name.startswith(STAGING_PREFIX) for name in watched.listed)
    assert leftovers(db)[2] == 0


@pytest.mark.parametrize("fail_at", [2, 4, "finish"])
def test_a_failure_half_way_leaves_nothing(db: Database, fail_at: int | str) -> None:
    owner = make_user(db, "bob")
    units = Watched(db, owner, fail_at)
    data = native(30)
    with pytest.raises(OSError, match="No space left"):
        run_staged(units, owner, ImportSource(io.BytesIO(data)), unit_rows=5)
    assert leftovers(db) == (0, 0, 0)
    with db.session() as session:
        assert seen_by(session, owner) == (0, 0, 0)
    assert staged(db, owner, data).imported == 30  # and it goes through when tried again


def test_a_quota_refusal_at_the_end_leaves_nothing(db: Database) -> None:
    owner = make_user(db, "carol")
    with pytest.raises(QuotaExceeded):
        staged(db, owner, native(12), limits=Limits(folders=1))
    assert leftovers(db) == (0, 0, 0)
    with db.session() as session:
        assert seen_by(session, owner) == (0, 0, 0)


def test_quotas_count_as_in_one_transaction(db: Database) -> None:
    data, limits = native(6, folders=()), Limits(conversations=4, messages=1)
    one, many = make_user(db, "dave"), make_user(db, "erin")
    with db.session() as session:
        once = import_source(
            session, user_row(session, one), ImportSource(io.BytesIO(data)), limits=limits
        )
    result = staged(db, many, data, limits=limits)
    assert (result.imported, result.evicted, result.evicted_messages) == (6, 2, 6)
    assert (once.evicted, once.evicted_messages) == (result.evicted, result.evicted_messages)
    with db.session() as session:
        users = user_row(session, one), user_row(session, many)
        assert [u.evicted_conversations for u in users] == [2, 2]
        assert [u.evicted_messages for u in users] == [6, 6]
        assert seen_by(session, one)[0] == seen_by(session, many)[0] == 4


@pytest.mark.parametrize(
    "name",
    [
        "chatmem_export.json",
        "chatgpt_conversations.json",
        "claude_conversations.json",
        "openwebui_export.json",
    ],
)
def test_stores_what_one_transaction_stores(db: Database, name: str) -> None:
    data = (SAMPLES / name).read_bytes()
    one, many = make_user(db, "frank"), make_user(db, "grace")
    with db.session() as session:
        once = import_source(session, user_row(session, one), ImportSource(io.BytesIO(data)))
    result = staged(db, many, data, unit_rows=1)
    assert {**result.as_json(), "conversation_ids": None} == {
        **once.as_json(),
        "conversation_ids": None,
    }
    assert _stored(db, one) == _stored(db, many)


def _stored(db: Database, user_id: str) -> list[tuple[Any, ...]]:
    with db.session() as session:
        rows = session.execute(
            select(Conversation, Folder.name)
            .outerjoin(Folder, Folder.id == Conversation.folder_id)
            .where(Conversation.user_id == user_id)
        ).all()
        stored = []
        for conversation, folder in rows:
            messages = session.execute(
                select(Message.seq, Message.role, Message.content)
                .where(Message.conversation_id == conversation.id)
                .order_by(Message.seq)
            ).all()
            stored.append((conversation.title, folder, conversation.pinned, tuple(messages)))
        return sorted(stored)


def written(units: Transactions, owner: str, data: bytes) -> StagedImport:
    """An import of ``data`` begun and written, not finished."""
    with tempfile.TemporaryFile() as spool:
        fmt, keys = read_prepared(ImportSource(io.BytesIO(data)), frozenset(), spool)
        job = StagedImport(owner, fmt, keys)
        units.read(job.look_up)
        units.write(job.begin)
        items = list(replay(spool))
    while items:
        items = items[units.write(functools.partial(job.write, items=items)) :]
    return job


def test_the_same_file_imported_twice_at_once_goes_in_once(db: Database) -> None:
    owner = make_user(db, "heidi")
    units = Transactions(db)
    first, second = written(units, owner, native(8)), written(units, owner, native(8))
    assert leftovers(db) == (16, 32, 2)
    assert units.write(first.finish).imported == 8
    with pytest.raises(Conflict):
        units.write(second.finish)
    second.discard(units)
    assert leftovers(db) == (8, 16, 0)


def test_what_a_crash_left_is_swept_once_it_is_stale(db: Database) -> None:
    owner = make_user(db, "ivan")
    units = Transactions(db)
    written(units, owner, native(4))
    assert leftovers(db) == (4, 8, 1)  # ... and the process died here
    assert sweep_stale(units) == 0  # a running import's rows are left alone
    assert leftovers(db) == (4, 8, 1)
    assert sweep_stale(units, now=utcnow() + timedelta(minutes=11)) == 1
    assert leftovers(db) == (0, 0, 0)
