"""A Server-Sent Events response whose first event leaves with the headers, and a run's
events served as one (:func:`follow`)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, AsyncIterable, AsyncIterator, Mapping

from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from chatmem.turns.events import RunEvent, sse

#: Seconds of silence on an events stream before a keep-alive comment.
KEEPALIVE_SECONDS = 15.0
#: An SSE comment: clients (browsers, OpenAI's SDKs) skip it.
KEEPALIVE = ": keep-alive\n\n"


class EventStreamResponse(StreamingResponse):
    """``text/event-stream`` that sends the headers and ``first`` at once, in the route's
    own task.  Starlette's :class:`StreamingResponse` starts streaming in a new task, a loop
    turn later — on the way to the first token, where the turn itself is busy."""

    media_type = "text/event-stream"

    def __init__(
        self,
        first: str | None,
        rest: AsyncIterable[str],
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(rest, headers=headers, media_type=self.media_type)
        self._first = first

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send(
            {"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers}
        )
        if self._first is not None:
            body = self._first.encode(self.charset)
            await send({"type": "http.response.body", "body": body, "more_body": True})
        await super().__call__(scope, receive, send)

    async def stream_response(self, send: Send) -> None:
        # The start (and the first event) went out in ``__call__``.
        async for chunk in self.body_iterator:
            data = chunk if isinstance(chunk, bytes | memoryview) else chunk.encode(self.charset)
            await send({"type": "http.response.body", "body": data, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})


async def batches(events: AsyncIterator[RunEvent]) -> AsyncGenerator[list[RunEvent], None]:
    """``events`` in batches: every event already waiting leaves together (a stored batch is
    published at once: one write for the lot, not one per token), and an empty batch marks
    :data:`KEEPALIVE_SECONDS` of silence (send :data:`KEEPALIVE`).  A pump task feeds a
    queue, so the silence never cancels the event iterator; it stops when this does."""
    queue: asyncio.Queue[RunEvent | None] = asyncio.Queue()

    async def pump() -> None:
        try:
            async for event in events:
                await queue.put(event)
        finally:
            await queue.put(None)

    task = asyncio.create_task(pump())
    try:
        while True:
            try:
                async with asyncio.timeout(KEEPALIVE_SECONDS):
                    item = await queue.get()
            except TimeoutError:
                yield []
                continue
            batch: list[RunEvent] = []
            while item is not None:
                batch.append(item)
                if queue.empty():
                    break
                item = queue.get_nowait()
            if batch:
                yield batch
            if item is None:
                return
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def follow(
    events: AsyncIterator[RunEvent], headers: Mapping[str, str] | None = None
) -> EventStreamResponse:
    """A run's events as an SSE response: the first one (replayed, or the next live one)
    leaves with the headers; keep-alive comments fill quiet stretches (a slow tool); the
    stream ends after ``done`` or ``error``."""
    first = await anext(events, None)

    async def stream() -> AsyncIterator[str]:
        if first is None or first.terminal:
            return
        async with contextlib.aclosing(batches(events)) as waiting:
            async for batch in waiting:
                yield "".join(sse(event) for event in batch) if batch else KEEPALIVE

    return EventStreamResponse(
        sse(first) if first is not None else None,
        stream(),
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no", **(headers or {})},
    )
