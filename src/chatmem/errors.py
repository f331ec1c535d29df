"""Every error chatmem raises on purpose, as data, never as HTTP.

Hierarchy::

    ChatmemError                      code (CONTRACT error code)
    ├── NotFound                      not_found        (also for other users' objects)
    ├── InvalidInput                  invalid_input
    │   └── ImportFormatError         invalid_input    (malformed or foreign export file)
    ├── Unauthorized                  unauthorized
    ├── Forbidden                     forbidden
    ├── EndpointNotAllowed            endpoint_not_allowed
    ├── QuotaExceeded                 quota_exceeded
    ├── Conflict                      conflict
    │   ├── TurnRunning               turn_running
    │   ├── CompactionRunning         compaction_running
    │   └── NothingToCompress         nothing_to_compress
    ├── InsufficientCredits           insufficient_credits
    ├── ArchiveDamaged                archive_damaged  (an archive failed its hash check)
    ├── ConfigurationError            configuration_error   (refuse to start)
    ├── SecretUnreadable              secret_unreadable  (wrong key, moved or damaged ciphertext)
    └── ProviderError                 provider_error   (the model API failed)
        ├── ProviderContextLength     context_length_exceeded
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


class SecretUnreadable(ChatmemError):
    """A stored secret cannot be decrypted: another master key, another row, or damage (PROF-2)."""

    code = "secret_unreadable"


class ProviderError(ChatmemError):
    """The model API answered with an error or could not be reached."""

    code = "provider_error"


class ProviderContextLength(ProviderError):
    """CTX-19: the provider itself says the request is longer than its context."""

    code = "context_length_exceeded"

    def __init__(
        self,
        message: str = (
            "The model refused the request as too long for its memory. Switch this chat to "
            "Economy mode, exclude some question–answer pairs, or choose a model with a "
            "larger window."
        ),
    ) -> None:
        super().__init__(message)


class ProviderAuthError(ProviderError):
    code = "provider_auth"


class ProviderRateLimited(ProviderError):
    code = "rate_limited"


class ProviderUnreachable(ProviderError):
    code = "provider_unreachable"
