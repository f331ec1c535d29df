"""The writers' gate (``store.db.TaskGate`` / ``Turns``): first come, first served, except
that units on the way to a first token go ahead — never more than ``OVERTAKE`` in a row while
another waits, and a cancelled waiter loses nobody a place."""

from __future__ import annotations

import asyncio

from tests.support.loop import settle

from chatmem.store.db import TaskGate, Turns


async def _order(gate: TaskGate, queued: list[tuple[str, bool]]) -> list[str]:
    """The order in which ``queued`` (name, first) get in, each arriving while the gate is
    held, in the order given."""
    order: list[str] = []
    release = asyncio.Event()

    async def holder() -> None:
        async with gate.hold():
            await release.wait()

    async def waiter(name: str, first: bool) -> None:
        async with gate.hold(first=first):
            order.append(name)

    held = asyncio.create_task(holder())
    await settle()
    tasks = []
    for name, first in queued:
        tasks.append(asyncio.create_task(waiter(name, first)))
        await settle()  # each one waiting before the next arrives
    release.set()
    await asyncio.gather(held, *tasks)
    return order


async def test_waiters_are_served_first_come_first_served() -> None:
    order = await _order(TaskGate(1), [("a", False), ("b", False), ("c", False)])
    assert order == ["a", "b", "c"]


async def test_a_first_token_goes_ahead_of_units_that_came_earlier() -> None:
    order = await _order(TaskGate(1), [("later-1", False), ("later-2", False), ("first", True)])
    assert order == ["first", "later-1", "later-2"]


async def test_first_tokens_overtake_at_most_overtake_in_a_row_while_another_waits() -> None:
    firsts = [(f"f{i}", True) for i in range(Turns.OVERTAKE + 2)]
    order = await _order(TaskGate(1), [("other", False), *firsts])
    # OVERTAKE first tokens, then the one that waited, then the rest.
    assert order.index("other") == Turns.OVERTAKE
    assert [name for name in order if name != "other"] == [name for name, _ in firsts]


async def test_a_cancelled_waiter_gives_its_place_to_the_next() -> None:
    gate = TaskGate(1)
    release = asyncio.Event()
    entered: list[str] = []

    async def holder() -> None:
        async with gate.hold():
            await release.wait()

    async def waiter(name: str) -> None:
        async with gate.hold():
            entered.append(name)

    held = asyncio.create_task(holder())
    await settle()
    gone = asyncio.create_task(waiter("gone"))
    stays = asyncio.create_task(waiter("stays"))
    await settle()
    gone.cancel()
    await settle()
    release.set()
    await asyncio.wait_for(asyncio.gather(held, stays), 5)
    assert entered == ["stays"]
    assert gone.cancelled()


async def test_a_waiter_cancelled_as_it_is_let_in_passes_the_place_on() -> None:
    turns = Turns(1)
    await turns.acquire()
    late = asyncio.create_task(turns.acquire())
    next_one = asyncio.create_task(turns.acquire())
    await settle()
    turns.release()  # lets ``late`` in …
    late.cancel()  # … but it is cancelled before it runs again
    await asyncio.wait_for(next_one, 5)  # the place went on
    assert late.cancelled()
    turns.release()
    await asyncio.wait_for(turns.acquire(), 5)  # and none was lost


async def test_a_task_inside_is_not_queued_again() -> None:
    gate = TaskGate(1)
    async with gate.hold(), gate.hold(first=True):  # would wait for itself
        pass
