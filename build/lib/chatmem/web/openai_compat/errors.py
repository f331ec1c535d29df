"""Errors in OpenAI's shape for ``/v1/*``: ``{"error": {"message", "type", "code"}}``.

Existing OpenAI client code handles them as it would OpenAI's own: the SDK raises
``BadRequestError`` with ``code == "context_length_exceeded"`` when the request cannot fit
(chatmem's ``does_not_fit``), ``AuthenticationError`` for an unknown token
(``invalid_api_key``), ``NotFoundError`` for an unknown model (``model_not_found``) or
conversation, ``RateLimitError`` with ``Retry-After``.  Every other chatmem code keeps its
name as ``code``.  ``x-should-retry: false`` tells the SDK not to retry what a retry cannot
fix (everything but ``rate_limited``): a retried turn would be a second turn.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fastapi.responses import JSONResponse

#: chatmem code → (HTTP status, OpenAI error type, OpenAI code).
OPENAI_ERRORS: dict[str, tuple[int, str, str]] = {
    "does_not_fit": (400, "invalid_request_error", "context_length_exceeded"),
    "context_length_exceeded": (400, "invalid_request_error", "context_length_exceeded"),
    "invalid_input": (400, "invalid_request_error", "invalid_request"),
    "unauthorized": (401, "invalid_request_error", "invalid_api_key"),
    "forbidden": (403, "permission_error", "forbidden"),
    "not_found": (404, "invalid_request_error", "not_found"),
    "method_not_allowed": (405, "invalid_request_error", "method_not_allowed"),
    "payload_too_large": (413, "invalid_request_error", "payload_too_large"),
    "insufficient_credits": (429, "insufficient_quota", "insufficient_quota"),
    "rate_limited": (429, "rate_limit_error", "rate_limit_exceeded"),
}
#: The statuses chatmem's own codes keep (409 conflicts, 502 provider failures …).
FALLBACK_TYPE = {409: "invalid_request_error", 500: "server_error", 502: "api_error"}


def is_openai_path(path: str) -> bool:
    return path == "/v1" or path.startswith("/v1/")


def openai_error(
    code: str,
    message: str,
    status: int,
    details: Mapping[str, Any] | None = None,
    headers: Mapping[str, str] | None = None,
) -> JSONResponse:
    """The OpenAI error body for chatmem's ``code`` (``status``: what chatmem would answer)."""
    status, kind, openai_code = OPENAI_ERRORS.get(
        code, (status, FALLBACK_TYPE.get(status, "invalid_request_error"), code)
    )
    if code == "not_found" and (details or {}).get("what") == "model":
        openai_code = "model_not_found"
    body: dict[str, Any] = {"message": message, "type": kind, "param": None, "code": openai_code}
    if openai_code == "context_length_exceeded":
        body["param"] = "messages"
    elif isinstance((details or {}).get("param"), str):
        body["param"] = (details or {})["param"]  # the request field at fault
    for key, value in (details or {}).items():
        if key not in body and isinstance(value, (str, int, float, bool)):
            body[key] = value
    extra = dict(headers or {})
    if code != "rate_limited":
        extra["x-should-retry"] = "false"
    return JSONResponse({"error": body}, status_code=status, headers=extra)
