"""``store_events``: a batch of run events stored in order with their data as given, and the
run's ``last_seq`` at the batch's end — on SQLite in two prepared statements, on PostgreSQL
in one (the rows as arrays, the ``last_seq`` update in the same statement)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from chatmem.store import accounts, runs
from chatmem.store.conversations import create_conversation
from chatmem.store.db import Database
from chatmem.store.quotas import UNLIMITED


@dataclass(frozen=True)
class _Event:
    seq: int
    type: str
    data: dict[str, Any]


def test_batches_are_stored_in_order_with_their_data_and_advance_last_seq(db: Database) -> None:
    with db.session() as session:
        user = accounts.create_user(session, "ann")
        chat = create_conversation(session, user, UNLIMITED)
        run_id = runs.start_run(
            session,
            user_id=user.id,
            conversation_id=chat.id,
            user_message_id=None,
            replica_id="r1",
        )
    first = [_Event(1, "delta", {"text": 'Привет, 世界 \U0001f600 "quoted" \\ \n'})]
    second = [
        _Event(2, "delta", {"text": "", "nested": {"list": [1, 2.5, None, True]}}),
        _Event(3, "tool_call", {"name": "search", "arguments": '{"q": "x"}'}),
        _Event(4, "done", {"stop_reason": None}),
    ]
    with db.session(write=True) as session:
        runs.store_events(session, run_id, first)
        runs.store_events(session, run_id, [])  # nothing to store: nothing changes
    with db.session() as session:
        assert runs.last_seq(session, run_id) == 1
    with db.session(write=True) as session:
        runs.store_events(session, run_id, second)
    with db.session() as session:
        stored = runs.events_after(session, run_id, 0)
        assert [(e.seq, e.type, e.data) for e in stored] == [
            (e.seq, e.type, e.data) for e in first + second
        ]
        assert runs.last_seq(session, run_id) == 4
        assert [e.seq for e in runs.events_after(session, run_id, 2)] == [3, 4]


def test_several_runs_batches_are_stored_together_each_in_order(db: Database) -> None:
    with db.session() as session:
        user = accounts.create_user(session, "bo")
        chat = create_conversation(session, user, UNLIMITED)
        run_ids = [
            runs.start_run(
                session,
                user_id=user.id,
                conversation_id=chat.id,
                user_message_id=None,
                replica_id="r1",
            )
            for _ in range(3)
        ]
    a, b, c = run_ids
    with db.session(write=True) as session:
        runs.store_event_batches(
            session.connection(),
            [
                (a, [_Event(1, "delta", {"text": "a1"}), _Event(2, "delta", {"text": "a2"})]),
                (b, [_Event(5, "delta", {"text": "b5 \u00e9\u4e16"})]),
                (c, []),  # nothing of this run: it keeps its last_seq
            ],
        )
        runs.store_event_batches(session.connection(), [])
    with db.session(write=True) as session:
        runs.store_event_batches(session.connection(), [(a, [_Event(3, "done", {})])])
    with db.session() as session:
        assert [(e.seq, e.type, e.data) for e in runs.events_after(session, a, 0)] == [
            (1, "delta", {"text": "a1"}),
            (2, "delta", {"text": "a2"}),
            (3, "done", {}),
        ]
        assert [(e.seq, e.data) for e in runs.events_after(session, b, 0)] == [
            (5, {"text": "b5 \u00e9\u4e16"})
        ]
        assert [runs.last_seq(session, r) for r in run_ids] == [3, 5, 0]
        assert [runs.owned_run(session, user.id, r).last_seq for r in run_ids] == [3, 5, 0]
