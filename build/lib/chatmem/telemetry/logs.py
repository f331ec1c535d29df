"""One logging set-up for the whole process (``chatmem serve`` and the CLI).

Readable lines by default, one JSON object a line with ``CHATMEM_LOG_FORMAT=json``.  Every
line a request causes carries that request's id (:data:`request_id`, set by the web layer's
middleware from ``X-Request-Id`` or made there); a turn's task is started inside its request,
so the turn's lines carry it too (asyncio copies the context into the task).

What is logged at INFO is operational: ids, profiles, counts, durations, outcomes.  Never a
key, a password or a message's text — those are not passed to the logger in the first place.
"""

from __future__ import annotations

import json
import logging
import sys
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import IO, Any, Literal

LogFormat = Literal["text", "json"]

#: The id of the request being served ("-" outside one).
request_id: ContextVar[str] = ContextVar("chatmem_request_id", default="-")

#: Attributes every LogRecord has; anything else on a record came as ``extra=`` and is data.
_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {
    "message",
    "asctime",
    "request_id",
    "taskName",
}


class RequestIdFilter(logging.Filter):
    """Puts the current request's id on each record (``%(request_id)s``)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not hasattr(record, "request_id"):
            record.request_id = request_id.get()
        return True


def _extras(record: logging.LogRecord) -> dict[str, Any]:
    return {k: v for k, v in vars(record).items() if k not in _STANDARD and not k.startswith("_")}


class TextFormatter(logging.Formatter):
    """``2026-12-03 18:02:11 INFO chatmem.turns [req 3f2a…] turn ended run=… outcome=…``."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s [%(request_id)s] %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        extras = _extras(record)
        if extras:
            line += " " + " ".join(f"{k}={_plain(v)}" for k, v in extras.items())
        return line


def _plain(value: Any) -> str:
    text = str(value)
    return json.dumps(text) if (" " in text or not text) else text


class JsonFormatter(logging.Formatter):
    """One JSON object a line: ``time``, ``level``, ``logger``, ``message``, ``request_id``,
    the record's extras, and ``exception`` when there is one."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "request_id": getattr(record, "request_id", "-"),
        }
        entry.update(_extras(record))
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str, ensure_ascii=False)


def configure_logging(level: str, fmt: LogFormat, stream: IO[str] | None = None) -> None:
    """Replaces the root logger's handlers with one writing ``fmt`` to ``stream`` (stderr);
    uvicorn's loggers go through it too (their own handlers removed)."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    handler.addFilter(RequestIdFilter())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        logger = logging.getLogger(name)
        logger.handlers.clear()
        logger.propagate = True
    # httpx logs every request at INFO, with its URL: the provider's address is ours to log,
    # in our words (models.client), not once per request.
    logging.getLogger("httpx").setLevel(max(logging.WARNING, root.level))
