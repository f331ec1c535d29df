"""A pure ASGI middleware that refuses request bodies larger than the configured limit.

It counts bytes as they arrive (a lying or absent ``Content-Length`` does not help), so an
oversized body is refused with 413 ``payload_too_large`` before any route logic could write
anything.  A declared ``Content-Length`` above the limit is refused before reading at all.
Imports get their own, larger limit (``max_import_bytes``).
"""

from __future__ import annotations

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from chatmem.settings import Settings
from chatmem.web.errors import error_response_for

IMPORT_PATH = "/api/v1/import"


class BodyTooLarge(HTTPException):
    def __init__(self, limit: int) -> None:
        super().__init__(413, f"The request body is larger than {limit} bytes.")


class BodyLimitMiddleware:
    def __init__(self, app: ASGIApp, settings: Settings) -> None:
        self.app = app
        self.settings = settings

    def limit_for(self, path: str) -> int:
        if path.rstrip("/") == IMPORT_PATH:
            return self.settings.max_import_bytes
        return self.settings.max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.limit_for(scope.get("path", ""))
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None:
            try:
                too_big = int(declared) > limit
            except ValueError:
                too_big = False
            if too_big:
                response = error_response_for(
                    scope.get("path", ""),
                    "payload_too_large",
                    f"The request body is larger than {limit} bytes.",
                    413,
                )
                await response(scope, receive, send)
                return
        received = 0

        async def counting_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    # Raised inside the app: the error handlers turn it into the CONTRACT shape.
                    raise BodyTooLarge(limit)
            return message

        await self.app(scope, counting_receive, send)
