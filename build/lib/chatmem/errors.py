"""Every error chatmem raises on purpose, as data, never as HTTP.

Hierarchy (every class; two live beside the one rule that raises them, named here)::

    ChatmemError                      code (CONTRACT error code)
    ├── NotFound                      not_found        (also for other users' objects)
    ├── InvalidInput                  invalid_input
    │   └── ImportFormatError         invalid_input    (malformed or foreign export file)
    ├── PayloadTooLarge               payload_too_large (an image over its size bound)
    ├── TooLarge                      too_large        (app context, pinned facts: CTX-24)
    ├── UploadTimedOut                request_timeout  (an upload slower than its time bound)
    ├── Unauthorized                  unauthorized
    ├── Forbidden                     forbidden
    ├── EndpointNotAllowed            endpoint_not_allowed
    ├── QuotaExceeded                 quota_exceeded
    ├── SigninThrottled               rate_limited     (failed sign-ins: chatmem.auth.throttle)
    ├── MemoryNotFolded               does_not_fit     (summaries too long: chatmem.turns.runner)
    ├── RateLimited                   rate_limited     (an app's calls, APPS-3)
    ├── McpUnavailable                mcp_unavailable  (an app's server is down, APPS-3)
    ├── Conflict                      conflict
    │   ├── TurnRunning               turn_running
    │   ├── CompactionRunning         compaction_running
    │   ├── NothingToCompress         nothing_to_compress
    │   └── ApprovalRequired          approval_required (an app's "ask first" call, APPS-3)
    ├── InsufficientCredits           insufficient_credits
    ├── ArchiveDamaged                archive_damaged  (an archive failed its hash check)
    ├── ConfigurationError            configuration_error   (refuse to start)
    ├── SecretUnreadable              secret_unreadable  (wrong key, moved or damaged ciphertext)
    └── ProviderError                 provider_error   (the model API failed)
        ├── ProviderContextLength     context_length_exceeded
        ├── ProviderEmptyStream       provider_error   (HTTP 200, nothing streamed: PROV-2)
        ├── ProviderRefusesTools      provider_refuses_tools (the server takes no tools)
        ├── AnswerTooLarge            answer_too_large (past CHATMEM_MAX_ANSWER_BYTES: PROV-5)
        ├── ProviderAuthError         provider_auth
        ├── ProviderRateLimited       rate_limited
        └── ProviderUnreachable       provider_unreachable

The context engine is pure and keeps its own errors (``chatmem.context.errors``:
``DoesNotFit`` with code ``does_not_fit``, ``PlanInputError`` with ``invalid_input``); they
carry a ``code`` attribute the same way, so the web layer (``chatmem.web.errors``) and the
CLI (``chatmem.cli``) map both families in one place each.
"""

from __future__ import annotations

from typing import Any


class ChatmemError(Exception):
    """Base class.  ``code`` is the CONTRACT error code; ``message`` is for people."""

    code = "error"

    def __init__(self, message: str, **data: Any) -> None:
        super().__init__(message)
        self.message = message
        self.data = data


class NotFound(ChatmemError):
    code = "not_found"

    def __init__(self, what: str = "object") -> None:
        super().__init__(f"{what} not found", what=what)


class InvalidInput(ChatmemError):
    code = "invalid_input"


class ImportFormatError(InvalidInput):
    """An import file is malformed or of an unknown format; nothing was changed."""


class PayloadTooLarge(ChatmemError):
    """An upload is larger than its bound (PROJ-2: an image over ``max_image_bytes``)."""

    code = "payload_too_large"


class TooLarge(ChatmemError):
    """APPS-3: an app's model context is more tokens than it may take; CTX-24: so would the
    pinned facts be.  Nothing was stored."""

    code = "too_large"

    def __init__(self, tokens: int, limit: int, *, message: str | None = None) -> None:
        super().__init__(
            message
            or f"The app's context is {tokens:,} tokens; an app may give the model at most "
            f"{limit:,}. Nothing was stored.",
            tokens=tokens,
            limit=limit,
        )


class UploadTimedOut(ChatmemError):
    """An upload did not arrive whole within ``upload_timeout_seconds``; nothing was changed."""

    code = "request_timeout"


class Unauthorized(ChatmemError):
    code = "unauthorized"


class Forbidden(ChatmemError):
    code = "forbidden"


class EndpointNotAllowed(ChatmemError):
    """A model or MCP URL is refused by the SSRF policy (PROF-4)."""

    code = "endpoint_not_allowed"


class QuotaExceeded(ChatmemError):
    code = "quota_exceeded"

    def __init__(self, kind: str, limit: int) -> None:
        super().__init__(f"You can keep at most {limit} {kind}.", kind=kind, limit=limit)


class Conflict(ChatmemError):
    code = "conflict"


class TurnRunning(Conflict):
    code = "turn_running"

    def __init__(self, message: str = "A turn is already running in this conversation.") -> None:
        super().__init__(message)


class CompactionRunning(Conflict):
    code = "compaction_running"

    def __init__(
        self, message: str = "Compression is already running, try again in a minute"
    ) -> None:
        super().__init__(message)


class NothingToCompress(Conflict):
    code = "nothing_to_compress"

    def __init__(self, message: str = "Nothing to compress yet") -> None:
        super().__init__(message)


class ApprovalRequired(Conflict):
    """APPS-3: an app called an "ask first" tool (PROV-6): the user approves first, then the
    page sends the call again, approved."""

    code = "approval_required"

    def __init__(self, tool: str) -> None:
        super().__init__(f"The user approves {tool!r} before it runs.", tool=tool)


class RateLimited(ChatmemError):
    """Too many requests in a short time (APPS-3: an app's calls): wait ``retry_after``."""

    code = "rate_limited"

    def __init__(self, message: str, retry_after: int) -> None:
        super().__init__(message, retry_after=max(1, retry_after))


class McpUnavailable(ChatmemError):
    """APPS-3: the app's MCP server cannot be reached now; nothing was done."""

    code = "mcp_unavailable"


class InsufficientCredits(ChatmemError):
    code = "insufficient_credits"

    def __init__(self, message: str = "Not enough credits to compress the memory") -> None:
        super().__init__(message)


class ArchiveDamaged(ChatmemError):
    """An archived conversation's stored copy is missing or fails its hash check (ARCH-2):
    nothing was changed, the archive record is kept for an operator to inspect."""

    code = "archive_damaged"


class ConfigurationError(ChatmemError):
    """The deployment is misconfigured (e.g. a malformed encryption key); refuse to start."""

    code = "configuration_error"


def missing_driver(setting: str, what: str) -> ConfigurationError:
    """``setting`` asks for a service whose driver is an extra that is not installed."""
    return ConfigurationError(
        f"{setting} is set, but the {what} driver is not installed: "
        "pip install 'chatmem[postgres]' (PostgreSQL and Redis for several replicas)."
    )


class SecretUnreadable(ChatmemError):
    """A stored secret cannot be decrypted: another master key, another row, or damage (PROF-2)."""

    code = "secret_unreadable"


class ProviderError(ChatmemError):
    """The model API answered with an error or could not be reached."""

    code = "provider_error"


CONTEXT_ADVICE = (
    "The model refused the request as too long for its memory. Switch this chat to "
    "Economy mode, exclude some question–answer pairs, or choose a model with a "
    "larger window."
)


class ProviderContextLength(ProviderError):
    """CTX-19: the provider itself says the request is longer than its context.

    ``requested_tokens``: the prompt size the provider named in its error, when it named one
    (PROV-2: it recalibrates the profile's estimate); ``window``: the context size it named."""

    code = "context_length_exceeded"

    def __init__(
        self,
        message: str = CONTEXT_ADVICE,
        *,
        requested_tokens: int | None = None,
        window: int | None = None,
    ) -> None:
        super().__init__(message, requested_tokens=requested_tokens, provider_window=window)
        self.requested_tokens = requested_tokens
        self.window = window


class ProviderEmptyStream(ProviderError):
    """PROV-2: the provider answered HTTP 200 and streamed nothing (llama.cpp does so when the
    prompt is beyond its context); the turn confirms with a non-streaming probe."""

    def __init__(
        self,
        message: str = (
            "The model API answered with an empty stream: no text, no tool call, no end."
        ),
    ) -> None:
        super().__init__(message)


class ProviderRefusesTools(ProviderError):
    """The model server does not take tool definitions (Ollama's "does not support tools",
    vLLM's "tool choice requires --enable-auto-tool-choice", llama.cpp's "tools param
    requires --jinja flag"): the request offered tools and was refused for it."""

    code = "provider_refuses_tools"


class AnswerTooLarge(ProviderError):
    """PROV-5: the answer passed the configured size bound; the stream was stopped and what
    arrived up to the bound is kept."""

    code = "answer_too_large"

    def __init__(self, limit: int) -> None:
        super().__init__(
            f"The answer was stopped at {_size(limit)}, the largest answer this server accepts "
            "(CHATMEM_MAX_ANSWER_BYTES). What arrived up to there is kept.",
            limit=limit,
        )
        self.limit = limit


def _size(n: int) -> str:
    if n >= 1024 * 1024:
        return f"{n / (1024 * 1024):.4g} MB"
    if n >= 1024:
        return f"{n / 1024:.4g} KB"
    return f"{n} bytes"


class ProviderAuthError(ProviderError):
    code = "provider_auth"


class ProviderRateLimited(ProviderError):
    code = "rate_limited"


class ProviderUnreachable(ProviderError):
    code = "provider_unreachable"
