"""The engine loader reads only the tail a plan needs (CTX-2: planning stays O(window))."""

from __future__ import annotations

import statistics
import time
from pathlib import Path

from sqlalchemy import insert

from chatmem.context import plan
from chatmem.context.values import Profile
from chatmem.store import accounts
from chatmem.store.conversations import create_conversation
from chatmem.store.db import Database
from chatmem.store.engine import LazyMessages, load_engine_conversation
from chatmem.store.messages import append_message, history
from chatmem.store.quotas import UNLIMITED, conversations_to_evict
from chatmem.store.tables.conversations import Conversation, Message


def _db(tmp_path: Path) -> Database:
    db = Database(f"sqlite:///{tmp_path / 'x.db'}")
    db.migrate()
    return db


def _bulk_conversation(db: Database, count: int) -> str:
    with db.session() as session:
        user = accounts.create_user(session, "u")
        conversation = create_conversation(session, user, UNLIMITED, title="long")
        rows = [
            {
                "id": f"m{i}",
                "conversation_id": conversation.id,
                "seq": i + 1,
                "role": "user" if i % 2 == 0 else "assistant",
                "content": f"message number {i} " * 5,
                "tokens_estimate": 30,
                "tokens_o200k": 25,
                "tokens_cl100k": 26,
                "excluded": False,
            }
            for i in range(count)
        ]
        session.execute(insert(Message), rows)
        return conversation.id


def test_lazy_messages_match_the_stored_history(tmp_path: Path) -> None:
    db = _db(tmp_path)
    cid = _bulk_conversation(db, 600)
    with db.session() as session:
        lazy = LazyMessages(session, cid, "tokens_o200k", page_size=100)
        assert len(lazy) == 600
        assert lazy[-1].id == "m599" and lazy[0].id == "m0" and lazy[-1].tokens == 25
        assert lazy.pages_loaded == 2
        assert [m.id for m in lazy[250:253]] == ["m250", "m251", "m252"]
        assert lazy.index(lazy[321]) == 321
        assert [m.id for m in lazy] == [f"m{i}" for i in range(600)]


def test_lazy_messages_survive_a_gap_in_seq(tmp_path: Path) -> None:
    db = _db(tmp_path)
    cid = _bulk_conversation(db, 10)
    with db.session() as session:
        session.query(Message).filter(Message.seq == 5).delete()
    with db.session() as session:
        lazy = LazyMessages(session, cid, "tokens_estimate", page_size=4)
        assert [m.id for m in lazy] == [f"m{i}" for i in range(10) if i != 4]


def test_plan_over_10000_messages_reads_only_the_tail_and_is_fast(tmp_path: Path) -> None:
    db = _db(tmp_path)
    cid = _bulk_conversation(db, 10_000)
    timings = []
    for _ in range(15):
        with db.session() as session:
            started = time.perf_counter()
            value = load_engine_conversation(session, cid, tokenizer="estimate")
            result = plan(value, Profile(), mode="window")
            timings.append(time.perf_counter() - started)
            assert result.fits
            assert value.messages.pages_loaded <= 2  # type: ignore[attr-defined]
    # Generous bar for a shared CI machine; bench/store.py measures the real figure.
    assert statistics.median(timings) < 0.05


def test_append_message_counts_tokens_once_for_every_tokenizer(tmp_path: Path) -> None:
    """The estimate at write time; an exact tokenizer no profile uses when first planned
    (issue 16), then stored."""
    db = _db(tmp_path)
    with db.session() as session:
        user = accounts.create_user(session, "u")
        conversation = create_conversation(session, user, UNLIMITED)
        row = append_message(session, conversation, "user", "Привет, world! " * 20)
        assert row.seq == 1
        assert row.tokens_estimate > 0
        for tokenizer in ("o200k_base", "cl100k_base"):
            load_engine_conversation(session, conversation.id, tokenizer=tokenizer)
        (row,) = history(session, conversation.id)  # as stored now
        assert row.tokens_estimate >= row.tokens_o200k > 0 and row.tokens_cl100k > 0


def test_store4_eviction_policy_pinned_set_aside_oldest_first_pinned_last() -> None:
    # newest first: (id, pinned)
    rows = [("n1", False), ("p1", True), ("n2", False), ("p2", True), ("n3", False)]
    assert conversations_to_evict(rows, 5) == []
    assert conversations_to_evict(rows, 3) == ["n3", "n2"]
    assert conversations_to_evict(rows, 2) == ["n3", "n2", "n1"]
    assert conversations_to_evict(rows, 1) == ["n3", "n2", "n1", "p2"]


def test_concurrent_sqlite_writers_wait_instead_of_failing(tmp_path: Path) -> None:
    """A read-then-write unit of work racing another writer must not hit 'database is locked'."""
    import threading

    db = _db(tmp_path)
    with db.session(write=True) as session:
        user = accounts.create_user(session, "u")
        cid = create_conversation(session, user, UNLIMITED).id
    errors: list[BaseException] = []

    def writer(n: int) -> None:
        try:
            for i in range(15):
                with db.session(write=True) as session:
                    conversation = session.get(Conversation, cid)
                    assert conversation is not None
                    append_message(session, conversation, "user", f"w{n} m{i}")
        except BaseException as exc:  # collected for the main thread
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    with db.session() as session:
        assert LazyMessages(session, cid, "tokens_estimate").__len__() == 60


def test_lazy_messages_random_access_agrees_with_a_list_for_any_page_size(tmp_path: Path) -> None:
    db = _db(tmp_path)
    cid = _bulk_conversation(db, 300)
    expected = [f"m{i}" for i in range(300)]
    for page_size in (1, 3, 32, 1000):
        with db.session() as session:
            lazy = LazyMessages(session, cid, "tokens_estimate", page_size=page_size)
            for i in (299, 0, 150, 37, -2, 268, 1):
                assert lazy[i].id == expected[i]
            assert [m.id for m in reversed(lazy)] == expected[::-1]
            assert [m.id for m in lazy[10:20:3]] == expected[10:20:3]
