"""The engine loader skips hidden versions (PROJ-3) by arithmetic: what it hands the engine is
exactly the shown messages, in order, read a page at a time (planning stays O(window))."""

from __future__ import annotations

import random

import pytest
from sqlalchemy import insert, update

from chatmem.store import accounts
from chatmem.store.conversations import create_conversation
from chatmem.store.db import Database
from chatmem.store.engine import LazyMessages, load_engine_conversation
from chatmem.store.quotas import UNLIMITED
from chatmem.store.tables.conversations import Message

COUNT = 120


def _conversation(db: Database) -> str:
    with db.session() as session:
        user = accounts.create_user(session, "u")
        conversation = create_conversation(session, user, UNLIMITED, title="versions")
        session.execute(
            insert(Message),
            [
                {
                    "id": f"m{i}",
                    "conversation_id": conversation.id,
                    "seq": i + 1,
                    "role": "user" if i % 2 == 0 else "assistant",
                    "content": f"message {i}",
                    "tokens_estimate": 10 + i,
                    "tokens_o200k": 10,
                    "tokens_cl100k": 10,
                    "excluded": False,
                }
                for i in range(COUNT)
            ],
        )
        return conversation.id


@pytest.mark.parametrize("seed", range(6))
def test_the_loader_hands_over_exactly_the_shown_messages(database_url: str, seed: int) -> None:
    rng = random.Random(seed)
    hidden = set(rng.sample(range(COUNT), rng.choice([0, 1, 5, 30])))
    if seed == 5:
        hidden |= {0, 1, COUNT - 1}  # at both ends too
    db = Database(database_url)
    db.migrate()
    try:
        cid = _conversation(db)
        with db.session() as session:
            session.execute(
                update(Message).where(Message.id.in_([f"m{i}" for i in hidden])).values(hidden=True)
            )
        shown = [i for i in range(COUNT) if i not in hidden]
        with db.session() as session:
            lazy = LazyMessages(session, cid, "tokens_estimate", page_size=4)
            assert len(lazy) == len(shown)
            assert [m.id for m in lazy] == [f"m{i}" for i in shown]
            assert [m.id for m in reversed(lazy)] == [f"m{i}" for i in reversed(shown)]
            for _ in range(40):
                start = rng.randrange(len(shown) + 1)
                stop = rng.randrange(start, len(shown) + 1)
                expected = sum(10 + i for i in shown[start:stop])
                assert lazy.tokens_between(start, stop) == expected, (start, stop)
            for i in range(COUNT):
                found = lazy.position_of(f"m{i}")
                assert found == (None if i in hidden else shown.index(i))
            # The newest page is all a short plan reads, however many versions are hidden.
            fresh = load_engine_conversation(session, cid)
            assert fresh.messages[-1].id == f"m{shown[-1]}"
            assert fresh.messages.pages_loaded == 1  # type: ignore[attr-defined]
    finally:
        db.dispose()
