"""Benchmark of export/import (STORE-5) and the archive (ARCH-1/2) on SQLite.

* Import: a synthetic ChatGPT ``conversations.json`` (``CHATMEM_BENCH_IMPORT_MB``, default
  20 MB; mapping trees of 4–30 nodes, word-like text) streamed into a fresh database in one
  transaction — MB/s of input, messages/s, the time spent holding the write transaction
  (parsing and token counting happen before it), and the process's peak RSS growth (memory
  stays bounded by one conversation plus a batch of rows, not by the file).
* Staged import: the same file imported as the server imports it (``store.exchange.staged``:
  short transactions that let other users' writes in between, the import shown at once by the
  last) — MB/s, and the longest transaction (what another writer may wait for).
* Export: the same data streamed back out as ``chatmem.export/1`` — MB/s of output.
* Native import: that export imported into a second database — MB/s.
* Archive and restore: every conversation archived (write, fsync, verify, rename, commit)
  then restored — MB/s of raw conversation documents, and one 5,000-message conversation.
Token counts are computed at write time during imports with the estimate and the exact
tokenizers profiles use (none here: the exact ones are counted when a plan first needs them;
restores reuse the counts kept in the archive).  The import is set against parsing the file
plus one count per message, in the same run.
"""

from __future__ import annotations

import json
import os
import random
import resource
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from chatmem.context import get_tokenizer
from chatmem.formats.source import ImportSource
from chatmem.store import accounts
from chatmem.store.archive import Archiver
from chatmem.store.db import Database
from chatmem.store.exchange.exporter import export_conversation_ids, export_stream
from chatmem.store.exchange.importer import import_source
from chatmem.store.exchange.staged import Transactions, run_staged
from chatmem.store.tables.accounts import User
from chatmem.store.tables.archives import Archive
from chatmem.store.token_counts import counts_for_text

MB = 1024 * 1024
T = TypeVar("T")
WORDS = [
    "the",
    "memory",
    "of",
    "a",
    "conversation",
    "grows",
    "with",
    "every",
    "turn",
    "and",
    "the",
    "model",
    "sees",
    "only",
    "what",
    "fits",
    "summary",
    "window",
    "economy",
    "budget",
    "tokens",
    "context",
    "plan",
    "archive",
    "restore",
    "import",
    "export",
    "file",
    "kitchen",
    "garden",
    "travel",
    "python",
    "database",
    "stream",
    "verify",
    "compress",
    "rename",
    "commit",
    "crash",
]


def _text(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words)).capitalize() + "."


def write_chatgpt(path: Path, megabytes: int, seed: int = 7) -> tuple[int, int]:
    """A ChatGPT-shaped export of about ``megabytes``; returns (conversations, messages)."""
    rng = random.Random(seed)
    target = megabytes * MB
    conversations = messages = 0
    with path.open("w", encoding="utf-8") as out:
        out.write("[")
        while out.tell() < target:
            mapping: dict[str, object] = {
                "root": {"id": "root", "message": None, "parent": None, "children": []}
            }
            parent = "root"
            turns = rng.randint(4, 30)
            for turn in range(turns):
                node = f"n{turn}"
                role = "user" if turn % 2 == 0 else "assistant"
                mapping[node] = {
                    "id": node,
                    "parent": parent,
                    "children": [],
                    "message": {
                        "id": f"c{conversations}-{node}",
                        "author": {"role": role},
                        "create_time": 1_764_489_600 + conversations * 100 + turn,
                        "content": {
                            "content_type": "text",
                            "parts": [_text(rng, rng.randint(10, 300))],
                        },
                        "metadata": {},
                        "recipient": "all",
                    },
                }
                mapping[parent]["children"].append(node)  # type: ignore[index]
                parent = node
            item = {
                "id": f"conv-{conversations}",
                "title": _text(rng, 4)[:60],
                "create_time": 1_764_489_600 + conversations * 100,
                "current_node": parent,
                "mapping": mapping,
            }
            out.write(("," if conversations else "") + json.dumps(item))
            conversations += 1
            messages += turns
        out.write("]")
    return conversations, messages


def peak_rss_mb() -> float:
    # ru_maxrss is KiB on Linux.
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def fresh_db(root: Path, name: str) -> tuple[Database, str]:
    db = Database(f"sqlite:///{root / name}")
    db.migrate()
    with db.session() as session:
        return db, accounts.create_user(session, "bench", is_admin=True).id


class TimedUnits(Transactions):
    """Plain transactions, each write timed."""

    def __init__(self, db: Database) -> None:
        super().__init__(db)
        self.times: list[float] = []

    def write(self, fn: Callable[[Session], T], /) -> T:
        started = time.perf_counter()
        try:
            return super().write(fn)
        finally:
            self.times.append(time.perf_counter() - started)


def staged_import(root: Path, source_path: Path) -> None:
    """The same file imported as the server imports it: in short transactions that let other
    writers in between, shown at once by the last (``store.exchange.staged``)."""
    db, user_id = fresh_db(root, "staged.db")
    units = TimedUnits(db)
    started = time.perf_counter()
    with source_path.open("rb") as raw:
        run_staged(units, user_id, ImportSource(raw))
    elapsed = time.perf_counter() - started
    size = source_path.stat().st_size
    print(
        f"import as the server runs it (staged: {len(units.times)} short transactions): "
        f"{size / MB / elapsed:.1f} MB/s ({elapsed:.1f} s); the longest transaction "
        f"{max(units.times) * 1000:.0f} ms, the last one (the import shown at once) "
        f"{units.times[-1] * 1000:.0f} ms"
    )


def main() -> int:
    megabytes = int(os.environ.get("CHATMEM_BENCH_IMPORT_MB", "20"))
    with tempfile.TemporaryDirectory(prefix="chatmem-bench-") as tmp:
        root = Path(tmp)
        source_path = root / "conversations.json"
        started = time.perf_counter()
        conversations, messages = write_chatgpt(source_path, megabytes)
        size = source_path.stat().st_size
        print(
            f"fixture: ChatGPT export {size / MB:.1f} MB, {conversations:,} conversations, "
            f"{messages:,} messages (written in {time.perf_counter() - started:.1f} s)"
        )

        db, user_id = fresh_db(root, "a.db")
        counts_for_text("load every tokenizer's tables before measuring memory")
        rss_before = peak_rss_mb()
        started = time.perf_counter()
        saving: list[float] = []
        with source_path.open("rb") as raw, db.session(write=True) as session:
            user = session.get(User, user_id)
            assert user is not None
            session.commit()  # like the API route: no lock while the file is read
            result = import_source(
                session,
                user,
                ImportSource(raw),
                on_saving=lambda: saving.append(time.perf_counter()),
            )
        elapsed = time.perf_counter() - started
        locked = time.perf_counter() - saving[0]
        print(
            f"import (ChatGPT, streamed, one transaction): {size / MB / elapsed:.1f} MB/s, "
            f"{result.messages / elapsed:,.0f} messages/s ({elapsed:.1f} s, of which "
            f"{locked:.1f} s in the write transaction); "
            f"peak RSS +{peak_rss_mb() - rss_before:.0f} MB for a {size / MB:.0f} MB file"
        )
        # The reference (issue 16): parsing the whole file plus one count per message
        # (after the import's peak RSS is read: it holds the whole document).
        started = time.perf_counter()
        estimate = get_tokenizer("estimate")
        for item in json.loads(source_path.read_bytes()):
            for node in item["mapping"].values():
                if node["message"]:
                    estimate.count(node["message"]["content"]["parts"][0])
        reference = time.perf_counter() - started
        print(
            f"reference: json.loads + one estimate count per message {size / MB / reference:.1f} "
            f"MB/s; the import takes {elapsed / reference:.1f}x that (bar: within 2x); "
            f"load average {os.getloadavg()[0]:.1f}"
        )
        staged_import(root, source_path)

        export_path = root / "export.json"
        started = time.perf_counter()
        with db.session() as session, export_path.open("wb") as out:
            user = session.get(User, user_id)
            assert user is not None
            for chunk in export_stream(session, export_conversation_ids(session, user)):
                out.write(chunk)
        elapsed = time.perf_counter() - started
        exported = export_path.stat().st_size
        print(
            f"export (chatmem.export/1, streamed): {exported / MB / elapsed:.1f} MB/s ({exported / MB:.1f} MB in {elapsed:.1f} s)"
        )

        other, other_user = fresh_db(root, "b.db")
        started = time.perf_counter()
        with export_path.open("rb") as raw, other.session() as session:
            user = session.get(User, other_user)
            assert user is not None
            import_source(session, user, ImportSource(raw))
        elapsed = time.perf_counter() - started
        print(f"import (chatmem.export/1): {exported / MB / elapsed:.1f} MB/s ({elapsed:.1f} s)")
        other.dispose()

        archiver = Archiver(db, root / "state", storage="file")
        ids = result.conversation_ids
        started = time.perf_counter()
        for cid in ids:
            archiver.archive(user_id, cid)
        archive_elapsed = time.perf_counter() - started
        with db.session() as session:
            raw_total = session.scalar(select(func.sum(Archive.raw_bytes))) or 0
            stored_total = session.scalar(select(func.sum(Archive.stored_bytes))) or 0
        started = time.perf_counter()
        for cid in ids:
            archiver.restore(user_id, cid)
        restore_elapsed = time.perf_counter() - started
        print(
            f"archive ({len(ids):,} conversations, fsync + verify each): "
            f"{raw_total / MB / archive_elapsed:.1f} MB/s, {len(ids) / archive_elapsed:.0f} conversations/s; "
            f"zstd ratio {raw_total / max(stored_total, 1):.1f}x"
        )
        print(
            f"restore ({len(ids):,} conversations): {raw_total / MB / restore_elapsed:.1f} MB/s, "
            f"{len(ids) / restore_elapsed:.0f} conversations/s"
        )

        big = root / "big.json"
        rng = random.Random(3)
        mapping: dict[str, object] = {}
        parent = None
        for turn in range(5_000):
            node = f"b{turn}"
            mapping[node] = {
                "id": node,
                "parent": parent,
                "children": [],
                "message": {
                    "id": node,
                    "author": {"role": "user" if turn % 2 == 0 else "assistant"},
                    "content": {"content_type": "text", "parts": [_text(rng, 150)]},
                },
            }
            parent = node
        big.write_text(
            json.dumps(
                [{"id": "big", "title": "Long one", "current_node": parent, "mapping": mapping}]
            )
        )
        with big.open("rb") as raw, db.session() as session:
            user = session.get(User, user_id)
            assert user is not None
            (big_id,) = import_source(session, user, ImportSource(raw)).conversation_ids
        started = time.perf_counter()
        entry = archiver.archive(user_id, big_id)
        archive_elapsed = time.perf_counter() - started
        started = time.perf_counter()
        archiver.restore(user_id, big_id)
        restore_elapsed = time.perf_counter() - started
        print(
            f"one 5,000-message conversation ({entry.raw_bytes / MB:.1f} MB): archive "
            f"{archive_elapsed * 1000:.0f} ms ({entry.raw_bytes / MB / archive_elapsed:.1f} MB/s), "
            f"restore {restore_elapsed * 1000:.0f} ms ({entry.raw_bytes / MB / restore_elapsed:.1f} MB/s)"
        )
        db.dispose()
    return 0


if __name__ == "__main__":
    sys.exit(main())
