"""A turn's first model request, sent while its admission is being written.

Admitting a new question reads everything that can refuse it (ownership, the model, whether
it fits: :meth:`TurnService._prepare`) and then writes the question and the ``running`` run.
The request the model gets depends only on what was read, so it can leave before the write:
the provider starts reading while the server writes, and the write leaves the path to the
first token.  Nothing is visible before it is durable all the same — the run's task, which
stores and publishes the events, starts only once the admission has committed; until then
the answer waits here.  If the write fails the request is cancelled (the provider may have
read it; nothing was stored or shown).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

from chatmem.models.client import StreamEvent

#: How long an admission waits for its first request to leave before it writes anyway (a
#: new connection to a far provider takes a handshake: the write does not wait for that).
SEND_WAIT_SECONDS = 0.05


@dataclass(frozen=True)
class _End:
    error: Exception | None = None


class EarlyStream:
    """The events of a model request opened now, kept until the turn's runner reads them.

    ``open_stream(on_sent)`` opens the request (``ModelClient.stream`` with its ``on_sent``
    callback).  A task reads it from the start, so the request leaves at once, and keeps the
    answer's first event until the runner asks for it."""

    def __init__(self, open_stream: Callable[[Callable[[], None]], AsyncIterator[StreamEvent]]):
        self._sent = asyncio.Event()
        #: One event read ahead at most: the rest is parsed as the runner asks for it, not
        #: in a burst competing with the first token's way out.
        self._queue: asyncio.Queue[StreamEvent | _End] = asyncio.Queue(maxsize=1)
        self._task = asyncio.create_task(self._pump(open_stream(self._sent.set)))

    async def _pump(self, events: AsyncIterator[StreamEvent]) -> None:
        try:
            async for event in events:
                await self._queue.put(event)
        except Exception as exc:  # raised where the runner reads, as a request's own would be
            await self._queue.put(_End(exc))
        else:
            await self._queue.put(_End())
        finally:
            self._sent.set()

    async def sent(self, within: float = SEND_WAIT_SECONDS) -> None:
        """Returns once the request has left — or failed, or ``within`` seconds passed."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(within):
                await self._sent.wait()

    async def events(self) -> AsyncIterator[StreamEvent]:
        """The answer's events, as the request's own stream would give them (its error
        included); the request is closed when the reader stops."""
        try:
            while True:
                item = await self._queue.get()
                if isinstance(item, _End):
                    if item.error is not None:
                        raise item.error
                    return
                yield item
        finally:
            await self.aclose()

    async def aclose(self) -> None:
        """Cancels the request if it is still streaming, and waits until it has let go."""
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)
