"""The one place where errors become HTTP responses.

``chatmem.errors`` and ``chatmem.context.errors`` carry a ``code``; this module maps each
code to a status and renders the CONTRACT shape ``{"error": {"code", "message"}}``.
Validation failures become ``invalid_input`` (422); anything unexpected is logged and
answered with a plain 500 without a traceback.  :data:`ERROR_RESPONSES` declares the shape in
``/openapi.json`` for every status an API route may answer with (the fuzzer checks it).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from typing import Any, cast

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from chatmem.context.errors import EngineError
from chatmem.errors import ChatmemError
from chatmem.web.openai_compat.errors import is_openai_path, openai_error

log = logging.getLogger(__name__)

STATUS_BY_CODE: dict[str, int] = {
    "not_found": 404,
    "invalid_input": 422,
    "unauthorized": 401,
    "forbidden": 403,
    "endpoint_not_allowed": 400,
    "quota_exceeded": 409,
    "conflict": 409,
    "turn_running": 409,
    "compaction_running": 409,
    "nothing_to_compress": 409,
    "approval_required": 409,
    "mcp_unavailable": 502,
    "does_not_fit": 413,
    "insufficient_credits": 402,
    "payload_too_large": 413,
    "too_large": 413,
    "request_timeout": 408,
    "context_length_exceeded": 413,
    "answer_too_large": 502,
    "provider_auth": 502,
    "rate_limited": 429,
    "provider_unreachable": 502,
    "provider_error": 502,
    "configuration_error": 500,
    "secret_unreadable": 500,
    "archive_damaged": 500,
}

_HTTP_CODES = {
    400: "invalid_input",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    413: "payload_too_large",
    415: "invalid_input",
    422: "invalid_input",
}


#: The CONTRACT error body.  ``code`` is the CONTRACT error code; some errors add data
#: (``needed``, ``limit`` …).  Inline rather than a model: a model's schema would be filed
#: under the operation's own media type, which is wrong for the SSE stream.
ERROR_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["error"],
    "properties": {
        "error": {
            "type": "object",
            "required": ["code", "message"],
            "properties": {"code": {"type": "string"}, "message": {"type": "string"}},
            "additionalProperties": True,
        }
    },
}


def _declared(description: str) -> dict[str, Any]:
    return {
        "description": description,
        "content": {"application/json": {"schema": ERROR_SCHEMA}},
    }


#: What every API operation may answer besides its success (declared in /openapi.json).
ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    400: {
        **_declared(
            "invalid_input, endpoint_not_allowed; or, in plain text from the HTTP server itself, "
            "a malformed request or a request line over 64 KB (a very long query string)"
        ),
        "content": {
            "application/json": {"schema": ERROR_SCHEMA},
            "text/plain": {"schema": {"type": "string"}},
        },
    },
    401: _declared("unauthorized: no or a wrong token or session"),
    403: _declared("forbidden: administrators only, or a missing CSRF token"),
    404: _declared("not_found, also for other users' objects"),
    405: _declared("method_not_allowed"),
    409: _declared("conflict, quota_exceeded, turn_running, compaction_running …"),
    413: _declared("payload_too_large, does_not_fit, too_large"),
    422: _declared("invalid_input: a field is missing, of the wrong type or out of bounds"),
    429: _declared("rate_limited, with Retry-After"),
}
#: Operations that ask an MCP server for an app also answer this (APPS-3).
MCP_RESPONSES: dict[int | str, dict[str, Any]] = {
    502: _declared("mcp_unavailable: the app's MCP server cannot be reached now")
}
#: Operations that receive an upload also answer this.
UPLOAD_RESPONSES: dict[int | str, dict[str, Any]] = {
    408: _declared("request_timeout: the upload did not arrive whole in time")
}
#: Operations that call a model synchronously also answer these.
PROVIDER_RESPONSES: dict[int | str, dict[str, Any]] = {
    402: _declared("insufficient_credits"),
    502: _declared("the model API failed: provider_error, provider_auth, provider_unreachable"),
}


def error_response(
    code: str,
    message: str,
    status: int | None = None,
    details: Mapping[str, Any] | None = None,
    headers: Mapping[str, str] | None = None,
) -> JSONResponse:
    """The CONTRACT error body.  ``details`` are extra JSON-safe fields beside code and message;
    they can never change the HTTP status, which follows the code alone."""
    body: dict[str, Any] = {}
    for key, value in (details or {}).items():
        if value is not None and isinstance(value, (str, int, float, bool)):
            body[key] = value
    body.update(code=code, message=message)
    return JSONResponse(
        {"error": body}, status_code=status or STATUS_BY_CODE.get(code, 400), headers=headers
    )


def error_response_for(
    path: str,
    code: str,
    message: str,
    status: int | None = None,
    details: Mapping[str, Any] | None = None,
    headers: Mapping[str, str] | None = None,
) -> JSONResponse:
    """:func:`error_response`, or OpenAI's error shape on the OpenAI-compatible ``/v1/*``."""
    if is_openai_path(path):
        return openai_error(
            code, message, status or STATUS_BY_CODE.get(code, 400), details, headers
        )
    return error_response(code, message, status, details, headers)


def _allowed_methods(request: Request) -> list[str] | None:
    """RFC 9110: a 405 lists every method of the resource.  FastAPI makes one route per
    method and Starlette's own ``Allow`` names only the first that matched the path, so the
    methods come from the API's description (``None`` for paths outside it)."""
    table = getattr(request.app.state, "allow_table", None)
    if table is None:
        table = []
        for template, operations in request.app.openapi().get("paths", {}).items():
            pattern = re.sub(r"\\\{[^/]+?\\\}", "[^/]+", re.escape(template))
            table.append((re.compile(f"^{pattern}$"), sorted(m.upper() for m in operations)))
        request.app.state.allow_table = table
    for pattern, methods in table:
        if pattern.match(request.url.path):
            return cast(list[str], methods)
    return None


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(ChatmemError)
    async def _chatmem(request: Request, exc: ChatmemError) -> JSONResponse:
        response = error_response_for(request.url.path, exc.code, exc.message, details=exc.data)
        retry_after = exc.data.get("retry_after")
        if exc.code == "rate_limited" and isinstance(retry_after, int):
            response.headers["Retry-After"] = str(retry_after)  # CONTRACT: 429 carries it
        return response

    @app.exception_handler(EngineError)
    async def _engine(request: Request, exc: EngineError) -> JSONResponse:
        return error_response_for(request.url.path, exc.code, str(exc), details=exc.details())

    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = exc.errors()
        first = errors[0] if errors else {}
        where = ".".join(str(p) for p in first.get("loc", ()) if p != "body")
        msg = first.get("msg", "invalid input")
        text = f"{where}: {msg}" if where else msg
        return error_response_for(request.url.path, "invalid_input", text, 422)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = _HTTP_CODES.get(exc.status_code, "error")
        headers = dict(exc.headers or {})
        allowed = _allowed_methods(request) if exc.status_code == 405 else None
        if allowed:  # every method of the path, not just the first route's
            headers["Allow"] = ", ".join(allowed)
        return error_response_for(
            request.url.path, code, str(exc.detail), exc.status_code, headers=headers
        )

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error")
        message = "Something went wrong on the server."
        return error_response_for(request.url.path, "internal_error", message, 500)
