"""A pure ASGI middleware that bounds every JSON request body of the API before a route parses
it (SEC-1; the rules live in :mod:`chatmem.bounds`).

For ``/api/…`` and ``/v1/…`` (the OpenAI-compatible endpoint) requests it refuses, with 422 ``invalid_input`` naming what and where:

* a NUL anywhere in the path or the query string (PostgreSQL cannot store it, and no id,
  search or cursor ever holds one — the same answer on SQLite);
* a JSON body (``application/json`` or ``…+json``) that nests deeper than the limit, holds an
  overlong string, too many items in one list or object, a number that is not finite or a
  whole number beyond 64 bits, or text that is not valid Unicode or holds NUL.

The body (already capped by :class:`~chatmem.web.body_limit.BodyLimitMiddleware`, which runs
first) is read whole, checked, and handed on unchanged, so routes parse exactly what was
checked.  ``POST /api/v1/import`` is left alone: an import is streamed, and its reader applies
the same bounds as it goes (:class:`chatmem.bounds.JsonScanner`).  Broken JSON is left to the
route too, which answers it as before.
"""

from __future__ import annotations

from urllib.parse import unquote_to_bytes

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from chatmem.bounds import Bounds, loads
from chatmem.errors import InvalidInput
from chatmem.settings import Settings
from chatmem.web.body_limit import IMPORT_PATH, BodyTooLarge
from chatmem.web.errors import error_response_for

_WRITES = frozenset({"POST", "PUT", "PATCH", "DELETE"})


def _is_json(headers: list[tuple[bytes, bytes]]) -> bool:
    for name, value in headers:
        if name == b"content-type":
            kind = value.split(b";", 1)[0].strip().lower()
            return kind == b"application/json" or (
                kind.startswith(b"application/") and kind.endswith(b"+json")
            )
    return False


def _url_problem(scope: Scope) -> str | None:
    if "\x00" in scope.get("path", ""):
        return "The path must not contain NUL (%00)."
    query: bytes = scope.get("query_string", b"")
    if b"%00" in query.lower() or b"\x00" in query or b"\x00" in unquote_to_bytes(query):
        return "The query string must not contain NUL (%00)."
    return None


class JsonBoundsMiddleware:
    def __init__(self, app: ASGIApp, settings: Settings) -> None:
        self.app = app
        self.bounds = Bounds.from_settings(settings)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "") if scope["type"] == "http" else ""
        if not path.startswith(("/api/", "/v1/")):
            await self.app(scope, receive, send)
            return
        problem = _url_problem(scope)
        if problem is not None:
            await error_response_for(path, "invalid_input", problem, 422)(scope, receive, send)
            return
        if (
            scope.get("method") not in _WRITES
            or path.rstrip("/") == IMPORT_PATH
            or not _is_json(scope.get("headers") or [])
        ):
            await self.app(scope, receive, send)
            return
        try:
            body = await _read_body(receive)
        except BodyTooLarge as exc:
            too_large = error_response_for(path, "payload_too_large", str(exc.detail), 413)
            await too_large(scope, receive, send)
            return
        try:
            if body:
                loads(body, self.bounds)
        except InvalidInput as exc:
            await error_response_for(path, "invalid_input", exc.message, 422)(scope, receive, send)
            return
        except (ValueError, RecursionError):  # broken JSON: the route answers it as usual
            pass
        await self.app(scope, _replay(body, receive), send)


async def _read_body(receive: Receive) -> bytes:
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            break
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


def _replay(body: bytes, receive: Receive) -> Receive:
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()  # after the body: wait for the disconnect, as Starlette does

    return replay
