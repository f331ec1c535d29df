"""Archive records (ARCH-1, ARCH-2): one row per archived conversation.

The conversation row itself stays (title, folder, ``archived_at`` set) so ownership checks,
title search of the archive and ids keep working; its messages, summaries and files leave the
live tables and live in one zstd-compressed ``chatmem.export/1`` document.  ``storage`` says
where that document is: ``file`` (``<state_dir>/archive/<user>/<id>.json.zst``) or
``database`` (``blob``, the same bytes, for PostgreSQL deployments whose replicas share no
disk).  ``sha256`` is the hash of the uncompressed document, checked on every read.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, ForeignKey, Integer, LargeBinary, String
from sqlalchemy.orm import Mapped, deferred, mapped_column

from chatmem.store.base import Base
from chatmem.store.types import UTCDateTime, utcnow


class Archive(Base):
    __tablename__ = "archives"

    conversation_id: Mapped[str] = mapped_column(
        ForeignKey("conversations.id", ondelete="CASCADE"), primary_key=True
    )
    user_id: Mapped[str] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    storage: Mapped[str] = mapped_column(String(16))
    sha256: Mapped[str] = mapped_column(String(64))
    raw_bytes: Mapped[int] = mapped_column(BigInteger)
    stored_bytes: Mapped[int] = mapped_column(BigInteger)
    message_count: Mapped[int] = mapped_column(Integer)
    archived_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    # Loaded only when asked for: listing the archive never pulls the compressed documents.
    blob: Mapped[bytes | None] = deferred(mapped_column(LargeBinary, nullable=True))
