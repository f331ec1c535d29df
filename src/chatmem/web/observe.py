"""Every request's id, access line and metrics, in one ASGI middleware (outermost but one).

``X-Request-Id``: a client's or proxy's id is taken when it is a plain token (letters, digits,
``-_.:``, at most 128), else one is made; it is in the response's header and in every log line
the request causes (:data:`chatmem.telemetry.logs.request_id`), the turn it starts included.
The access line names the method, the path without its query (a plan's ``?draft=`` is the
user's text), the status and the time to the end of the answer.  Metrics count by the route's
template, and a streamed answer (``text/event-stream``) counts as an SSE watcher while open.
"""

from __future__ import annotations

import logging
import re
import time
import uuid

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from chatmem.telemetry.logs import request_id
from chatmem.telemetry.metrics import Metrics

log = logging.getLogger("chatmem.http")

HEADER = b"x-request-id"
_TOKEN = re.compile(rb"[A-Za-z0-9._:-]{1,128}")
#: Polled by probes and scrapers: their lines are DEBUG, not INFO.
QUIET = frozenset({"/healthz", "/readyz", "/metrics"})


def _incoming(scope: Scope) -> str | None:
    for name, value in scope.get("headers", ()):
        if name == HEADER and _TOKEN.fullmatch(value):
            return str(value.decode("ascii"))
    return None


class RequestContextMiddleware:
    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        rid = _incoming(scope) or uuid.uuid4().hex
        token = request_id.set(rid)
        began = time.perf_counter()
        status = 500
        streaming = False

        async def sending(message: Message) -> None:
            nonlocal status, streaming
            if message["type"] == "http.response.start":
                status = message["status"]
                headers = list(message.get("headers", ()))
                streaming = any(
                    k == b"content-type" and v.startswith(b"text/event-stream") for k, v in headers
                )
                headers.append((HEADER, rid.encode("ascii")))
                message = {**message, "headers": headers}
                if streaming:
                    self.metrics.sse_watchers.inc()
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            if streaming:
                self.metrics.sse_watchers.dec()
            self._done(scope, status, time.perf_counter() - began)
            request_id.reset(token)

    def _done(self, scope: Scope, status: int, seconds: float) -> None:
        route = scope.get("route")
        template = getattr(route, "path", None) or "<unmatched>"
        method = scope["method"]
        self.metrics.requests.labels(template, method, str(status)).inc()
        self.metrics.request_seconds.labels(template, method).observe(seconds)
        path = scope["path"]
        level = logging.DEBUG if path in QUIET else logging.INFO
        if log.isEnabledFor(level):
            log.log(level, "%s %s %d %.1f ms", method, path, status, seconds * 1000)
