"""Column types and value helpers shared by every table module.

Ids are opaque strings (uuid4 hex).  Times are stored as timezone-aware UTC: SQLite keeps no
zone, so :class:`UTCDateTime` re-attaches UTC on the way out and converts on the way in, and
both backends hand back the same aware ``datetime``.
"""

from __future__ import annotations

import os
import re
import uuid
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import BigInteger, DateTime, Integer
from sqlalchemy.engine import Dialect
from sqlalchemy.types import TypeDecorator

# SQLite only aliases the rowid for a column declared exactly ``INTEGER PRIMARY KEY``; PostgreSQL
# wants 64 bits for a table that may hold hundreds of millions of rows.
RowId = BigInteger().with_variant(Integer(), "sqlite")

#: The largest value of an ``Integer`` column on PostgreSQL (32 bits; SQLite's take 64).  A
#: value compared with such a column must fit, or PostgreSQL refuses the whole statement
#: (``NumericValueOutOfRange``): input that reaches one is bounded by this first.
INTEGER_MAX = 2**31 - 1


# The form of every id chatmem issues (:func:`new_id`).  An id from outside (an import file, a
# request) that is not of this form never names a stored row as it is, nor a file.
_OWN_ID = re.compile(r"[0-9a-f]{32}")


def new_id() -> str:
    return uuid.uuid4().hex


def is_own_id(value: str) -> bool:
    """Whether ``value`` has the form of an id chatmem issues (32 lowercase hex digits)."""
    return _OWN_ID.fullmatch(value) is not None


def new_ids(count: int) -> list[str]:
    """``count`` ids of :func:`new_id`'s kind (random version-4 UUIDs in hex) from one read
    of the OS's random source: an import names thousands of messages at once, and a
    ``uuid.UUID`` built for each cost a few percent of it (issue 16)."""
    raw = bytearray(os.urandom(16 * count))
    # The UUID's version (4, the high nibble of byte 6) and variant (0b10, the top bits of
    # byte 8), set as uuid.UUID(bytes=…, version=4) sets them.
    raw[6::16] = bytes(byte & 0x0F | 0x40 for byte in raw[6::16])
    raw[8::16] = bytes(byte & 0x3F | 0x80 for byte in raw[8::16])
    text = raw.hex()
    return [text[start : start + 32] for start in range(0, len(text), 32)]


def utcnow() -> datetime:
    return datetime.now(UTC)


def iso(value: datetime | None) -> str | None:
    """ISO-8601 in UTC with a ``Z`` (the CONTRACT's time format)."""
    if value is None:
        return None
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z")


class UTCDateTime(TypeDecorator[datetime]):
    """A ``DateTime`` that is always aware UTC in Python, whatever the backend stores."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> Any:
        if value is None:
            return None
        if value.tzinfo is None:
            value = value.replace(tzinfo=UTC)
        value = value.astimezone(UTC)
        if dialect.name == "sqlite":
            # Naive text sorts correctly and compares with what SQLite's own functions produce.
            return value.replace(tzinfo=None)
        return value

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)
