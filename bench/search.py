"""Conversation search against its own index, side by side (STORE-7, issue 16).

For each query of the mix, in one run and interleaved (so a busy machine weighs on both
alike), the median of:

* chatmem: ``list_conversations(q=…)`` — the first page of 50, what ``GET
  /api/v1/conversations?q=`` runs (without HTTP);
* raw: the bare full-text query for the same conversation ids, on the same connection — the
  title index and the message index, their union (SQLite: FTS5 ``MATCH`` and the covering
  index from message number to conversation; PostgreSQL: the two GIN indexes).

Bars: every query within 3× of its raw reference, and the median of chatmem's medians at
most 10 ms (SQLite, 50,000 conversations / 1,000,000 messages: the fixture of
``bench/store.py``, built once and cached in ``bench/_data/`` keyed by the schema heads).
PostgreSQL, when reachable at ``CHATMEM_BENCH_POSTGRES_URL``, runs the same mix at
``CHATMEM_BENCH_PG_CONVERSATIONS`` conversations of 20 messages (default 50,000: the same
scale) in a throwaway database, with its own raw reference; its bars are reported, not
enforced (the build alone takes minutes).  The machine's load average is printed with the
figures.  Exit status 1 when a SQLite bar is missed.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.support

from alembic.script import ScriptDirectory
from sqlalchemy import select, text
from sqlalchemy.orm import Session
from tests.support.served import PostgresUnreachable, throwaway_postgres

from chatmem.store.conversations import list_conversations
from chatmem.store.db import Database
from chatmem.store.migrations import alembic_config
from chatmem.store.search import fts5_query, tsquery
from chatmem.store.tables.accounts import User
from store import DATA, PG_URL, build_fixture, build_sqlite_fixture

# bench/store.py's mix: rare, absent together, common, a short prefix, a longer prefix.
QUERIES = ("volcano", "tolstoy espresso", "w0042", "w4", "kuber")
RATIO_BAR = 3.0
MEDIAN_BAR = 0.010
RUNS = 15
PG_CONVERSATIONS = int(os.environ.get("CHATMEM_BENCH_PG_CONVERSATIONS", "50000"))

RAW_SQLITE = text(
    "SELECT r.conversation_id FROM conversations_fts JOIN conversations_fts_rowids AS r "
    "ON r.num = conversations_fts.rowid WHERE conversations_fts MATCH :q "
    "UNION SELECT m.conversation_id FROM messages_fts "
    "JOIN messages AS m INDEXED BY ix_messages_num_conversation ON m.num = messages_fts.rowid "
    "WHERE messages_fts MATCH :q"
)
RAW_POSTGRES = text(
    "SELECT id FROM conversations WHERE to_tsvector('simple', title) @@ "
    "to_tsquery('simple', :q) UNION SELECT conversation_id FROM messages "
    "WHERE to_tsvector('simple', content) @@ to_tsquery('simple', :q)"
)


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f} on {os.cpu_count()} CPUs"


def side_by_side(
    ours: Callable[[], object], raw: Callable[[], object], runs: int = RUNS
) -> tuple[float, float]:
    ours()
    raw()  # warm caches
    mine: list[float] = []
    theirs: list[float] = []
    for _ in range(runs):
        for fn, samples in ((ours, mine), (raw, theirs)):
            started = time.perf_counter()
            fn()
            samples.append(time.perf_counter() - started)
    return statistics.median(mine), statistics.median(theirs)


def measure(label: str, session: Session, user: User, raw_sql: object, *, enforce: bool) -> bool:
    print(f"{label}: {load()}", flush=True)
    print(f"  {'query':<20} {'chatmem':>10} {'raw index':>10} {'ratio':>7}  hits", flush=True)
    dialect = session.get_bind().dialect.name
    ok = True
    medians = []
    for query in QUERIES:
        match = fts5_query(query) if dialect == "sqlite" else tsquery(query)
        hits = len(session.execute(raw_sql, {"q": match}).all())  # type: ignore[call-overload]

        def ours(q: str = query) -> object:
            return list_conversations(session, user, limit=50, q=q).items

        def raw(m: str | None = match) -> object:
            return session.execute(raw_sql, {"q": m}).all()  # type: ignore[call-overload]

        mine, theirs = side_by_side(ours, raw)
        medians.append(mine)
        ratio = mine / theirs
        verdict = "" if ratio <= RATIO_BAR else f"  (bar {RATIO_BAR:.0f}x: MISSED)"
        ok = ok and ratio <= RATIO_BAR
        print(
            f"  {query!r:<20} {mine * 1000:>7.2f} ms {theirs * 1000:>7.2f} ms {ratio:>6.2f}x"
            f"  {hits}{verdict}",
            flush=True,
        )
    overall = statistics.median(medians)
    median_ok = overall <= MEDIAN_BAR
    print(
        f"  median of chatmem's medians: {overall * 1000:.2f} ms (bar {MEDIAN_BAR * 1000:.0f} ms: "
        f"{'ok' if median_ok else 'MISSED'}); {load()}",
        flush=True,
    )
    if not enforce:
        return True
    return ok and median_ok


def heads_key() -> str:
    heads = sorted(ScriptDirectory.from_config(alembic_config()).get_heads())
    return hashlib.sha256(" ".join(heads).encode()).hexdigest()[:12]


def sqlite_fixture() -> Path:
    DATA.mkdir(parents=True, exist_ok=True)
    path = DATA / f"search-{heads_key()}.db"
    if path.exists():
        return path
    for old in DATA.glob("search-*.db"):  # an older schema's copy
        old.unlink()
    build_sqlite_fixture(path)
    return path


def bench_sqlite() -> bool:
    db = Database(f"sqlite:///{sqlite_fixture()}")
    db.migrate()
    try:
        with db.session() as session:
            user = session.scalars(select(User).where(User.name == "bench")).one()
            return measure(
                "sqlite 50k conversations / 1M messages", session, user, RAW_SQLITE, enforce=True
            )
    finally:
        db.dispose()


def bench_postgres() -> None:
    if PG_CONVERSATIONS <= 0:
        print("postgresql: skipped (CHATMEM_BENCH_PG_CONVERSATIONS=0)")
        return
    with contextlib.ExitStack() as stack:
        try:
            url = stack.enter_context(throwaway_postgres(PG_URL, "chatmem_bench"))
        except PostgresUnreachable as exc:
            print(f"postgresql: skipped ({exc})")
            return
        db = Database(url)
        db.migrate()
        started = time.perf_counter()
        build_fixture(db, PG_CONVERSATIONS, 20)
        # What autovacuum does in a running server: the GIN indexes' pending lists merged
        # (a fresh bulk load leaves them for every query to scan), statistics gathered.
        with db.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.execute(text("VACUUM ANALYZE"))
        print(
            f"built the PostgreSQL fixture ({PG_CONVERSATIONS:,} conversations, "
            f"{PG_CONVERSATIONS * 20:,} messages) in {time.perf_counter() - started:.0f} s",
            flush=True,
        )
        with db.session() as session:
            user = session.scalars(select(User).where(User.name == "bench")).one()
            measure(
                f"postgresql {PG_CONVERSATIONS // 1000}k conversations / "
                f"{PG_CONVERSATIONS * 20 // 1000}k messages",
                session,
                user,
                RAW_POSTGRES,
                enforce=False,
            )
        db.dispose()


def main() -> int:
    ok = bench_sqlite()
    bench_postgres()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
