"""Benchmark of the storage room (issue 3): appends, planning from the database, list, search.

* Append throughput: messages/s through ``append_message`` (the estimate counted at write
  time — no profile names an exact tokenizer here, those are counted when first planned —
  one commit per message, as a turn does).
* Plan from the database: median of ``load_engine_conversation`` + ``plan`` on a
  10,000-message conversation (bar: 5 ms).
* List and search: one user with 50,000 conversations and 1,000,000 messages on SQLite; the
  median of the first list page, a page deep in the list (keyset cursor) and full-text /
  title searches (bar: 50 ms each).  The fixture is bulk-inserted once and cached in
  ``bench/_data/`` keyed by schema revision; its token columns hold a cheap length estimate
  (they play no part in list/search).
* PostgreSQL, when reachable at ``CHATMEM_BENCH_POSTGRES_URL`` (default
  postgresql://postgres@127.0.0.1:5432/test): the same list/search figures at a tenth of the
  size (5,000 conversations, 100,000 messages) in a throwaway database.
Exit status 1 when a bar is missed.
"""

from __future__ import annotations

import contextlib
import os
import random
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.support

from sqlalchemy import insert, text
from tests.support.served import PostgresUnreachable, throwaway_postgres

from chatmem.context import Profile, plan
from chatmem.store import accounts
from chatmem.store.conversations import create_conversation, list_conversations
from chatmem.store.db import Database
from chatmem.store.engine import load_engine_conversation
from chatmem.store.messages import append_message
from chatmem.store.quotas import UNLIMITED
from chatmem.store.tables.accounts import User
from chatmem.store.tables.conversations import Conversation, Message, Summary

FIXTURE_VERSION = "3"
DATA = Path(__file__).resolve().parent / "_data"
PG_URL = os.environ.get("CHATMEM_BENCH_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")
LIST_BAR = 0.050
PLAN_BAR = 0.005
failures: list[str] = []


def median_of(fn: Callable[[], object], runs: int = 21) -> float:
    fn()  # warm caches
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - started)
    return statistics.median(samples)


def report(label: str, seconds: float, bar: float | None = None) -> None:
    verdict = ""
    if bar is not None:
        ok = seconds < bar
        verdict = f"  (bar {bar * 1000:.0f} ms: {'ok' if ok else 'MISSED'})"
        if not ok:
            failures.append(label)
    print(f"{label}: {seconds * 1000:.2f} ms{verdict}", flush=True)


# --- vocabulary: Zipf-like, so searches hit common, medium and rare words -------------------

WORDS = [f"w{i:04d}" for i in range(5000)]
NAMED = ["volcano", "invoice", "kubernetes", "espresso", "tolstoy", "quarterly", "migration"]


def sentence(rng: random.Random, n: int) -> str:
    picks = [WORDS[min(int(rng.paretovariate(1.1)) - 1, len(WORDS) - 1)] for _ in range(n)]
    if rng.random() < 0.01:
        picks[rng.randrange(n)] = rng.choice(NAMED)
    return " ".join(picks)


def build_fixture(db: Database, conversations: int, per_conversation: int) -> str:
    """Bulk-inserts one user's conversations and messages; returns the user id."""
    rng = random.Random(7)
    start = datetime(2024, 1, 1, tzinfo=UTC)
    with db.session() as session:
        user = accounts.create_user(session, "bench")
        user_id = user.id
    batch_c: list[dict[str, object]] = []
    batch_m: list[dict[str, object]] = []

    def flush() -> None:
        with db.engine.begin() as conn:
            if batch_c:
                conn.execute(insert(Conversation), batch_c)
            if batch_m:
                conn.execute(insert(Message), batch_m)
        batch_c.clear()
        batch_m.clear()

    for c in range(conversations):
        cid = uuid.UUID(int=rng.getrandbits(128)).hex
        when = start + timedelta(minutes=c * 7)
        batch_c.append(
            {
                "id": cid,
                "user_id": user_id,
                "title": sentence(rng, 4).title(),
                "folder_id": None,
                "pinned": c % 500 == 0,
                "mode": "full",
                "profile_id": None,
                "instructions": "",
                "source": None,
                "created_at": when,
                "updated_at": when,
                "last_active_at": when,
                "archived_at": None,
            }
        )
        for m in range(per_conversation):
            content = sentence(rng, rng.randint(6, 30))
            tokens = 4 + len(content) // 3
            batch_m.append(
                {
                    "id": uuid.UUID(int=rng.getrandbits(128)).hex,
                    "conversation_id": cid,
                    "seq": m + 1,
                    "role": "user" if m % 2 == 0 else "assistant",
                    "content": content,
                    "created_at": when + timedelta(seconds=m),
                    "tokens_estimate": tokens,
                    "tokens_o200k": tokens,
                    "tokens_cl100k": tokens,
                    "excluded": False,
                }
            )
        if len(batch_m) >= 50_000:
            flush()
    flush()
    return user_id


def measure_list_and_search(db: Database, user_id: str, label: str) -> None:
    with db.session() as session:
        user = session.get(User, user_id)
        assert user is not None
        first = list_conversations(session, user, limit=50)
        cursor = first.next_cursor
        for _ in range(40):  # 2,000 conversations deep
            page = list_conversations(session, user, limit=50, cursor=cursor)
            cursor = page.next_cursor
        report(
            f"{label} list first page (50)",
            median_of(lambda: list_conversations(session, user, limit=50)),
            LIST_BAR,
        )
        report(
            f"{label} list page 41 via cursor",
            median_of(lambda: list_conversations(session, user, limit=50, cursor=cursor)),
            LIST_BAR,
        )
        for query in ("volcano", "tolstoy espresso", "w0042", "w4", "kuber"):
            hits = len(list_conversations(session, user, limit=50, q=query).items)
            report(
                f"{label} search {query!r} ({hits} on first page)",
                median_of(
                    lambda q=query: list_conversations(session, user, limit=50, q=q), runs=11
                ),
                LIST_BAR,
            )


def build_sqlite_fixture(path: Path) -> None:
    """The 50,000-conversation / 1,000,000-message SQLite fixture at ``path``: built under a
    temporary name and renamed when complete, so an interrupted build is never mistaken for
    a cached fixture; analysed and checkpointed, so it opens ready."""
    building = path.with_suffix(f".building-{os.getpid()}")
    started = time.perf_counter()
    db = Database(f"sqlite:///{building}")
    db.migrate()
    build_fixture(db, 50_000, 20)
    with db.engine.begin() as conn:
        conn.execute(text("ANALYZE"))
    with db.engine.connect() as conn:
        conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
    db.dispose()
    building.rename(path)
    print(
        f"built the SQLite fixture (50,000 conversations, 1,000,000 messages) in "
        f"{time.perf_counter() - started:.0f} s",
        flush=True,
    )


def bench_sqlite_large() -> None:
    DATA.mkdir(parents=True, exist_ok=True)
    probe = Database(f"sqlite:///{DATA / 'probe.db'}")
    probe.migrate()
    revision = probe.current_revision()
    probe.dispose()
    (DATA / "probe.db").unlink(missing_ok=True)
    for suffix in ("-wal", "-shm"):
        (DATA / f"probe.db{suffix}").unlink(missing_ok=True)
    path = DATA / f"store-{revision}-v{FIXTURE_VERSION}.db"
    if not path.exists():
        build_sqlite_fixture(path)
    db = Database(f"sqlite:///{path}")
    db.migrate()
    with db.engine.connect() as conn:
        user_id = conn.execute(text("SELECT id FROM users WHERE name = 'bench'")).scalar_one()
    measure_list_and_search(db, user_id, "sqlite 50k/1M")
    db.dispose()


def bench_append_and_plan() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        db = Database(f"sqlite:///{tmp}/append.db")
        db.migrate()
        with db.session() as session:
            user = accounts.create_user(session, "a")
            cid = create_conversation(session, user, UNLIMITED).id
        rng = random.Random(3)
        count = 1000
        started = time.perf_counter()
        for i in range(count):
            with db.session(write=True) as session:
                conversation = session.get(Conversation, cid)
                assert conversation is not None
                append_message(
                    session, conversation, "user" if i % 2 == 0 else "assistant", sentence(rng, 40)
                )
        elapsed = time.perf_counter() - started
        print(
            f"sqlite append_message: {count / elapsed:.0f} messages/s "
            f"({elapsed / count * 1000:.2f} ms each, counted with the estimate, no profile "
            f"naming an exact tokenizer, one commit each; bar 1,000/s)",
            flush=True,
        )

        long_id = build_fixture(db, 1, 10_000)
        with db.engine.connect() as conn:
            long_cid = conn.execute(
                text("SELECT id FROM conversations WHERE user_id = :u"), {"u": long_id}
            ).scalar_one()

        def planned(m: str) -> Callable[[], None]:
            def run() -> None:
                with db.session() as session:
                    plan(load_engine_conversation(session, long_cid), Profile(), mode=m)  # type: ignore[arg-type]

            return run

        # Worst case, no summary yet: full/economy must read a whole window's worth of
        # messages (~800 here) to build the first compaction request.  Informational.
        for mode in ("full", "economy"):
            report(
                f"sqlite load+plan 10,000 messages, no summary yet ({mode})",
                median_of(planned(mode), runs=7),
            )
        # Steady state: a summary covers all but the recent tail (bar applies).
        with db.engine.begin() as conn:
            through = conn.execute(
                text("SELECT id FROM messages WHERE conversation_id = :c AND seq = 9960"),
                {"c": long_cid},
            ).scalar_one()
            conn.execute(
                insert(Summary),
                [
                    {
                        "id": uuid.uuid4().hex,
                        "conversation_id": long_cid,
                        "version": 1,
                        "first_message_id": None,
                        "through_message_id": through,
                        "message_count": 9960,
                        "text": sentence(rng, 300),
                        "focus": None,
                        "cost": 0.0,
                        "model": None,
                        "tokens_estimate": 600,
                        "tokens_o200k": 500,
                        "tokens_cl100k": 500,
                        "created_at": datetime.now(UTC),
                    }
                ],
            )
        for mode in ("full", "window", "economy"):
            report(
                f"sqlite load+plan 10,000 messages with a summary ({mode})",
                median_of(planned(mode)),
                PLAN_BAR,
            )
        db.dispose()


def bench_postgres() -> None:
    with contextlib.ExitStack() as stack:
        try:
            url = stack.enter_context(throwaway_postgres(PG_URL, "chatmem_bench"))
        except PostgresUnreachable as exc:
            print(f"postgresql: skipped ({exc})")
            return
        db = Database(url)
        db.migrate()
        started = time.perf_counter()
        user_id = build_fixture(db, 5_000, 20)
        with db.engine.begin() as conn:
            conn.execute(text("ANALYZE"))
        print(
            f"built the PostgreSQL fixture (5,000 conversations, 100,000 messages) in "
            f"{time.perf_counter() - started:.0f} s",
            flush=True,
        )
        measure_list_and_search(db, user_id, "postgresql 5k/100k")
        db.dispose()


def main() -> int:
    bench_append_and_plan()
    bench_sqlite_large()
    bench_postgres()
    if failures:
        print("missed: " + "; ".join(failures))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
