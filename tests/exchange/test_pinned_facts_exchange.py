"""CTX-24 with STORE-5 and ARCH-1: a conversation's pinned facts travel with it — in its
export (``facts``, oldest first, with the message each was picked from), through an import
on another server, and through an archive and its restore — and come back in their order,
sent as before."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from sqlalchemy import select
from tests.exchange.builders import exported, make_user, open_db, rich_conversation, user_row

from chatmem.errors import ImportFormatError
from chatmem.formats.source import ImportSource
from chatmem.settings import Settings
from chatmem.store import pinned_facts
from chatmem.store.archive import Archiver
from chatmem.store.db import Database
from chatmem.store.engine import load_engine_conversation
from chatmem.store.exchange.importer import import_source
from chatmem.store.messages import history
from chatmem.store.tables.pinned_facts import PinnedFactRow

FACTS = ["The budget is 10,000 EUR.", "Tiles: Calacatta, 60×120 cm."]


def pin_facts(db: Database, user_id: str, cid: str) -> str:
    with db.session() as session:
        first = history(session, cid)[0].id
        pinned_facts.add_fact(session, user_id, cid, FACTS[0], first)
        pinned_facts.add_fact(session, user_id, cid, FACTS[1])
    return first


def listed(db: Database, user_id: str, cid: str) -> list[tuple[str, str | None]]:
    with db.session() as session:
        return [(f.text, f.message_id) for f in pinned_facts.list_facts(session, user_id, cid)]


def sent_block(db: Database, cid: str) -> str:
    with db.session() as session:
        facts = load_engine_conversation(session, cid).pinned_facts
        return facts.text if facts is not None else ""


def test_ctx24_facts_round_trip_through_export_and_import(db: Database, tmp_path: Path) -> None:
    alice = make_user(db, "alice")
    cid = rich_conversation(db, alice)
    first = pin_facts(db, alice, cid)
    (before,) = exported(db, [cid])
    assert [(f["text"], f["message_id"]) for f in before["facts"]] == [
        (FACTS[0], first),
        (FACTS[1], None),
    ]
    other = open_db(f"sqlite:///{tmp_path / 'other.db'}")
    try:
        bob = make_user(other, "bob")
        data = json.dumps({"format": "chatmem.export/1", "conversations": [before]}).encode()
        with other.session() as session:
            import_source(session, user_row(session, bob), ImportSource(io.BytesIO(data)))
        assert listed(other, bob, cid) == [(FACTS[0], first), (FACTS[1], None)]
        assert exported(other, [cid]) == [before]
        assert sent_block(other, cid) == sent_block(db, cid) != ""
    finally:
        other.dispose()


def test_ctx24_an_import_past_the_bounds_is_refused_by_name(db: Database) -> None:
    alice = make_user(db, "alice")
    cid = rich_conversation(db, alice)
    (item,) = exported(db, [cid])
    item["id"] = "c9" + "0" * 30
    for facts, problem in (
        ([{"text": "x"}] * 51, "at most 50 pinned facts"),
        ([{"text": "x" * 1_001}], "at most 1,000 characters"),
        ([{"text": ("word " * 190).strip()}] * 20, "at most 4,000"),
    ):
        data = json.dumps(
            {"format": "chatmem.export/1", "conversations": [{**item, "facts": facts}]}
        ).encode()
        with pytest.raises(ImportFormatError, match=problem), db.session() as session:
            import_source(session, user_row(session, alice), ImportSource(io.BytesIO(data)))


@pytest.mark.parametrize("storage", ["file", "database"])
def test_ctx24_facts_survive_archive_and_restore(
    db: Database, settings: Settings, storage: str
) -> None:
    alice = make_user(db, "alice")
    cid = rich_conversation(db, alice)
    first = pin_facts(db, alice, cid)
    block = sent_block(db, cid)
    archiver = Archiver(db, settings.state_dir, storage=storage)
    archiver.archive(alice, cid)
    with db.session() as session:  # out of the live tables while archived
        rows = select(PinnedFactRow.id).where(PinnedFactRow.conversation_id == cid)
        assert session.scalar(rows) is None
    archiver.restore(alice, cid)
    assert listed(db, alice, cid) == [(FACTS[0], first), (FACTS[1], None)]
    assert sent_block(db, cid) == block
