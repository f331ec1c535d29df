"""What finding a headerless OpenAI request's conversation costs (API-1, issue 29).

One user with 10,000 conversations of 100 messages (SQLite; bulk-inserted through the store
by ``bench/store.py``'s ``build_fixture`` and indexed by migration 0020's backfill, whose
time is printed; cached in ``bench/_data/`` keyed by the schema head).  For requests that
repeat one of those conversations (its whole view and a new question), interleaved:

* index lookup — what matching adds to a headerless request: the request's hash chain
  (:func:`chatmem.store.history_keys.lookup_keys`) and one read of the ``(user_id, key)``
  index (:func:`~chatmem.store.history_keys.candidates`);  bar: median ≤ 1 ms;
* verify — the hit's stored view read and compared (``stored_view`` + ``continues``): the
  same work as a request naming its conversation by header did before (and does now);
* full-view compare, without an index: every conversation's stored view read and compared
  until the one repeated is found (a few runs: it is the scan the index replaces).

Median and p95 of each, and the machine's load.  Exit status 1 when the bar is missed.
"""

from __future__ import annotations

import os
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sqlalchemy import select, text

from chatmem.store.db import Database
from chatmem.store.history_keys import backfill, candidates, lookup_keys
from chatmem.store.tables.conversations import Conversation
from chatmem.turns.history_match import Said, stored_view
from chatmem.turns.history_turns import continues
from store import DATA, build_fixture

CONVERSATIONS = 10_000
PER_CONVERSATION = 100
FIXTURE_VERSION = "1"
LOOKUP_BAR = 0.001
RUNS = 300
SCAN_RUNS = 3


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f} on {os.cpu_count()} CPUs"


def fixture() -> tuple[Database, str]:
    DATA.mkdir(parents=True, exist_ok=True)
    probe = Database(f"sqlite:///{DATA / 'probe-history.db'}")
    probe.migrate()
    revision = probe.current_revision()
    probe.dispose()
    for suffix in ("", "-wal", "-shm"):
        (DATA / f"probe-history.db{suffix}").unlink(missing_ok=True)
    path = DATA / f"history-{revision}-v{FIXTURE_VERSION}.db"
    if not path.exists():
        building = path.with_suffix(f".building-{os.getpid()}")
        started = time.perf_counter()
        db = Database(f"sqlite:///{building}")
        db.migrate()
        build_fixture(db, CONVERSATIONS, PER_CONVERSATION)
        built = time.perf_counter() - started
        started = time.perf_counter()
        with db.engine.begin() as conn:
            backfill(conn)  # what migration 0020 does to an existing database
        indexed = time.perf_counter() - started
        with db.engine.begin() as conn:
            conn.execute(text("ANALYZE"))
        with db.engine.connect() as conn:
            conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
        db.dispose()
        building.rename(path)
        print(
            f"built {CONVERSATIONS:,} conversations of {PER_CONVERSATION} messages in "
            f"{built:.0f} s; the migration's backfill indexed them in {indexed:.1f} s "
            f"({CONVERSATIONS / indexed:,.0f} conversations/s)",
            flush=True,
        )
    db = Database(f"sqlite:///{path}")
    db.migrate()
    with db.engine.connect() as conn:
        user_id = conn.execute(text("SELECT id FROM users WHERE name = 'bench'")).scalar_one()
    return db, user_id


def timed(fn: Callable[[], object]) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def figures(samples: list[float]) -> str:
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))]
    return f"median {statistics.median(ordered) * 1000:8.3f} ms   p95 {p95 * 1000:8.3f} ms"


def main() -> int:
    db, user_id = fixture()
    rng = random.Random(29)
    with db.session() as session:
        ids = list(session.scalars(select(Conversation.id).where(Conversation.user_id == user_id)))
        # Requests that repeat a conversation's view and ask one more question.
        requests: list[tuple[str, list[Said]]] = []
        for conversation_id in rng.sample(ids, 50):
            view = stored_view(session, conversation_id).messages
            requests.append((conversation_id, [*view, Said("user", "One more question?")]))

        def lookup(messages: list[Said]) -> list[str]:
            return candidates(session, user_id, lookup_keys(messages))

        def verify(conversation_id: str, messages: list[Said]) -> bool:
            return continues(stored_view(session, conversation_id).messages, messages)

        for conversation_id, messages in requests:  # warm, and check the answers
            assert lookup(messages)[0] == conversation_id, "the index missed"
            assert verify(conversation_id, messages)
        looked: list[float] = []
        verified: list[float] = []
        for i in range(RUNS):
            conversation_id, messages = requests[i % len(requests)]
            looked.append(timed(lambda m=messages: lookup(m)))  # type: ignore[misc]
            verified.append(timed(lambda c=conversation_id, m=messages: verify(c, m)))  # type: ignore[misc]

        def scan(target: str, messages: list[Said]) -> str | None:
            for conversation_id in ids:
                if verify(conversation_id, messages):
                    return conversation_id
            return None

        scanned = []
        for conversation_id, messages in requests[:SCAN_RUNS]:
            scanned.append(timed(lambda c=conversation_id, m=messages: scan(c, m)))  # type: ignore[misc]
    db.dispose()
    median = statistics.median(looked)
    ok = median <= LOOKUP_BAR
    print(f"history match, {CONVERSATIONS:,} conversations x {PER_CONVERSATION} messages, one user")
    print(
        f"  index lookup (chain + one indexed read)  {figures(looked)}"
        f"   (bar {LOOKUP_BAR * 1000:.0f} ms: {'ok' if ok else 'MISSED'})"
    )
    print(f"  verify the hit (one view read + compare) {figures(verified)}")
    print(f"  full-view compare of every conversation  {figures(scanned)}   ({SCAN_RUNS} runs)")
    print(f"  {load()}", flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
