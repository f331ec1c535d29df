"""A Server-Sent Events response whose first event leaves with the headers."""

from __future__ import annotations

from collections.abc import AsyncIterable, Mapping

from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send


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
