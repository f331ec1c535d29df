"""The event journal: stored before it is published (durable before visible), in order, in
group-committed batches, complete at every checkpoint (TURN-2, TURN-6)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from sqlalchemy.exc import IntegrityError

from chatmem.store import accounts, runs
from chatmem.store.conversations import create_conversation
from chatmem.store.db import Database
from chatmem.store.quotas import Limits
from chatmem.turns.coordinator import LocalCoordinator
from chatmem.turns.events import RunEvent
from chatmem.turns.journal import EventJournal


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Database]:
    database = Database(f"sqlite:///{tmp_path / 'journal.db'}")
    database.migrate()
    yield database
    database.dispose()


def _conversation(db: Database) -> tuple[str, str]:
    with db.session(write=True) as session:
        user = accounts.create_user(session, "journal")
        conversation = create_conversation(session, user, Limits())
        return user.id, conversation.id


def _new_run(db: Database, user_id: str, conversation_id: str, run_id: str | None = None) -> str:
    with db.session(write=True) as session:
        return runs.start_run(
            session,
            user_id=user_id,
            conversation_id=conversation_id,
            user_message_id=None,
            replica_id="test",
            run_id=run_id,
        )


def _stored(db: Database, run_id: str) -> list[tuple[int, str]]:
    with db.session() as session:
        return [(e.seq, e.type) for e in runs.events_after(session, run_id, 0)]


async def test_every_published_event_was_stored_first_in_order_TURN_2(db: Database) -> None:
    run_id = _new_run(db, *_conversation(db))
    coordinator = LocalCoordinator()
    await coordinator.open_run(run_id)
    journal = EventJournal(run_id, db, coordinator)
    for i in range(7):
        await journal.emit("delta", {"text": str(i)})
    live: list[int] = []
    async for event in _until(coordinator, run_id, 7):
        # What a watcher sees is already in the database: a kill -9 now loses none of it.
        assert (event.seq, "delta") in _stored(db, run_id)
        live.append(event.seq)
    assert live == list(range(1, 8))
    await journal.flush()
    assert _stored(db, run_id) == [(seq, "delta") for seq in range(1, 8)]
    with db.session() as session:
        assert runs.owned_run(session, _owner(db, run_id), run_id).last_seq == 7


async def test_events_are_published_only_after_their_write_commits(db: Database) -> None:
    run_id = _new_run(db, *_conversation(db))
    coordinator = LocalCoordinator()
    await coordinator.open_run(run_id)
    journal = EventJournal(run_id, db, coordinator)
    async with db.writers.hold():  # another writer holds the turn: nothing can be stored
        await journal.emit("delta", {"text": "a"})
        await journal.emit("delta", {"text": "b"})
        assert not await _published(coordinator, run_id)
    await journal.flush()
    assert [e.seq for e in await _published(coordinator, run_id)] == [1, 2]


async def test_the_terminal_event_is_stored_with_the_checkpoint_writes_in_one_unit(
    db: Database,
) -> None:
    user_id, conversation_id = _conversation(db)
    run_id = _new_run(db, user_id, conversation_id)
    journal = EventJournal(run_id, db, LocalCoordinator())
    await journal.emit("delta", {"text": "hi"})
    await journal.end(
        "done", {"status": "completed"}, lambda s: runs.finish_run(s, run_id, "completed")
    )
    assert _stored(db, run_id) == [(1, "delta"), (2, "done")]
    with db.session() as session:
        assert runs.owned_run(session, user_id, run_id).status == "completed"


async def test_a_failed_background_write_surfaces_at_the_checkpoint_and_is_written_again(
    db: Database,
) -> None:
    user_id, conversation_id = _conversation(db)
    run_id = "not-stored-yet"
    journal = EventJournal(run_id, db, LocalCoordinator())
    await journal.emit("delta", {"text": "a"})
    await journal.emit("delta", {"text": "b"})  # written in the background: no run row yet
    with pytest.raises(IntegrityError):
        await journal.flush()
    _new_run(db, user_id, conversation_id, run_id=run_id)
    await journal.emit("delta", {"text": "c"})
    await journal.flush()
    assert _stored(db, run_id) == [(1, "delta"), (2, "delta"), (3, "delta")]


async def _published(coordinator: LocalCoordinator, run_id: str) -> list[RunEvent]:
    """What the live log holds right now (without waiting for more)."""
    return list(coordinator._logs[run_id].events) if run_id in coordinator._logs else []


async def _until(coordinator: LocalCoordinator, run_id: str, last: int) -> AsyncIterator[RunEvent]:
    async for event in coordinator.watch(run_id, 0):
        yield event
        if event.seq >= last:
            return


def _owner(db: Database, run_id: str) -> str:
    from chatmem.store.tables.runs import Run

    with db.session() as session:
        run = session.get(Run, run_id)
        assert run is not None
        return run.user_id


async def test_the_end_is_published_after_its_writes_and_the_release_never_by_the_writer(
    db: Database,
) -> None:
    user_id, conversation_id = _conversation(db)
    run_id = _new_run(db, user_id, conversation_id)
    coordinator = LocalCoordinator()
    await coordinator.open_run(run_id)
    order: list[str] = []

    async def released() -> None:
        order.append(f"released, {len(await _published(coordinator, run_id))} published")

    journal = EventJournal(run_id, db, coordinator, before_end=released)
    async with db.writers.hold():  # the background writer is still busy when the end comes
        await journal.emit("delta", {"text": "a"})
    await journal.end(
        "done",
        {"status": "completed"},
        lambda s: (order.append("stored"), runs.finish_run(s, run_id, "completed")),
    )
    assert order == ["stored", "released, 1 published"]
    assert [e.type for e in await _published(coordinator, run_id)] == ["delta", "done"]
