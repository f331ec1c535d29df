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
from chatmem.turns.events import Delta, Done, RunEvent
from chatmem.turns.journal import EventJournal, EventWrites


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Database]:
    database = Database(f"sqlite:///{tmp_path / 'journal.db'}")
    database.migrate()
    yield database
    database.dispose()


@pytest.fixture(params=["a unit per batch", "shared writes"])
def writes(request: pytest.FixtureRequest, db: Database) -> EventWrites | None:
    """PostgreSQL's way (a unit of work per run's batch) and SQLite's (one writer for every
    run's batches, :class:`EventWrites`): the journal keeps its promises either way."""
    return EventWrites(db) if request.param == "shared writes" else None


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


def _done(seq: int) -> Done:
    return Done(seq, "completed", None, None, {}, 0.0, None, None)


def _stored(db: Database, run_id: str) -> list[tuple[int, str]]:
    with db.session() as session:
        return [(e.seq, e.type) for e in runs.events_after(session, run_id, 0)]


async def test_every_published_event_was_stored_first_in_order_TURN_2(
    db: Database, writes: EventWrites | None
) -> None:
    run_id = _new_run(db, *_conversation(db))
    coordinator = LocalCoordinator()
    await coordinator.open_run(run_id)
    journal = EventJournal(run_id, db, coordinator, writes=writes)
    for i in range(7):
        await journal.emit(Delta, str(i), 0)
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


async def test_events_are_published_only_after_their_write_commits(
    db: Database, writes: EventWrites | None
) -> None:
    run_id = _new_run(db, *_conversation(db))
    coordinator = LocalCoordinator()
    await coordinator.open_run(run_id)
    journal = EventJournal(run_id, db, coordinator, writes=writes)
    async with db.writers.hold():  # another writer holds the turn: nothing can be stored
        await journal.emit(Delta, "a", 0)
        await journal.emit(Delta, "b", 0)
        assert not await _published(coordinator, run_id)
    await journal.flush()
    assert [e.seq for e in await _published(coordinator, run_id)] == [1, 2]


async def test_the_terminal_event_is_stored_with_the_checkpoint_writes_in_one_unit(
    db: Database,
    writes: EventWrites | None,
) -> None:
    user_id, conversation_id = _conversation(db)
    run_id = _new_run(db, user_id, conversation_id)
    journal = EventJournal(run_id, db, LocalCoordinator(), writes=writes)
    await journal.emit(Delta, "hi", 0)
    await journal.end(lambda s: runs.finish_run(s, run_id, "completed"), _done)
    assert _stored(db, run_id) == [(1, "delta"), (2, "done")]
    with db.session() as session:
        assert runs.owned_run(session, user_id, run_id).status == "completed"


async def test_a_failed_background_write_surfaces_at_the_checkpoint_and_is_written_again(
    db: Database,
    writes: EventWrites | None,
) -> None:
    user_id, conversation_id = _conversation(db)
    run_id = "not-stored-yet"
    journal = EventJournal(run_id, db, LocalCoordinator(), writes=writes)
    await journal.emit(Delta, "a", 0)
    await journal.emit(Delta, "b", 0)  # written in the background: no run row yet
    with pytest.raises(IntegrityError):
        await journal.flush()
    _new_run(db, user_id, conversation_id, run_id=run_id)
    await journal.emit(Delta, "c", 0)
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
    writes: EventWrites | None,
) -> None:
    user_id, conversation_id = _conversation(db)
    run_id = _new_run(db, user_id, conversation_id)
    coordinator = LocalCoordinator()
    await coordinator.open_run(run_id)
    order: list[str] = []

    async def released() -> None:
        order.append(f"released, {len(await _published(coordinator, run_id))} published")

    journal = EventJournal(run_id, db, coordinator, before_end=released, writes=writes)
    async with db.writers.hold():  # the background writer is still busy when the end comes
        await journal.emit(Delta, "a", 0)
    await journal.end(
        lambda s: (order.append("stored"), runs.finish_run(s, run_id, "completed")), _done
    )
    assert order == ["stored", "released, 1 published"]
    assert [e.type for e in await _published(coordinator, run_id)] == ["delta", "done"]


def _commits(db: Database) -> list[int]:
    """Counts the commits of ``db`` from now on (``[n]``)."""
    from sqlalchemy import event

    counted = [0]

    @event.listens_for(db.engine, "commit")
    def _count(_connection: object) -> None:
        counted[0] += 1

    return counted


async def test_shared_writes_store_every_waiting_runs_batch_in_one_commit(db: Database) -> None:
    user_id, conversation_id = _conversation(db)
    run_ids = [_new_run(db, user_id, conversation_id) for _ in range(5)]
    coordinator = LocalCoordinator()
    writes = EventWrites(db)
    journals = [EventJournal(r, db, coordinator, writes=writes) for r in run_ids]
    for run_id in run_ids:
        await coordinator.open_run(run_id)
    commits = _commits(db)
    for journal in journals:
        await journal.emit(Delta, "a", 0)
        await journal.flush()
    assert commits == [5]  # a run's first batch goes alone, with its first token
    async with db.writers.hold():  # another writer: every run's next batch waits its turn
        for journal in journals:
            await journal.emit(Delta, "b", 0)
        for journal in journals:
            await journal.emit(Delta, "c", 0)  # after "b" (one writer per run)
        assert commits == [5]
    for journal in journals:
        await journal.flush()  # waits for its writer; nothing left of its own to store
    # Every run's "b" together, then every run's "c".
    assert commits == [7]
    for run_id in run_ids:
        assert _stored(db, run_id) == [(1, "delta"), (2, "delta"), (3, "delta")]
        assert [e.seq for e in await _published(coordinator, run_id)] == [1, 2, 3]
        with db.session() as session:
            assert runs.owned_run(session, user_id, run_id).last_seq == 3


async def test_shared_writes_a_run_that_cannot_be_stored_fails_alone(db: Database) -> None:
    user_id, conversation_id = _conversation(db)
    kept = _new_run(db, user_id, conversation_id)
    writes = EventWrites(db)
    coordinator = LocalCoordinator()
    good = EventJournal(kept, db, coordinator, writes=writes, start_seq=4)
    orphan = EventJournal("no-such-run", db, coordinator, writes=writes, start_seq=4)
    async with db.writers.hold():  # both batches wait for the same unit
        await good.emit(Delta, "kept", 0)
        await orphan.emit(Delta, "lost", 0)
    await good.flush()
    assert _stored(db, kept) == [(5, "delta")]
    with pytest.raises(IntegrityError):
        await orphan.flush()
