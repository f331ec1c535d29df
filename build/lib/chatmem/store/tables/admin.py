"""The administrators' audit trail (USE-5).

``admin_actions`` — one row per thing an administrator did through the admin API: who
(``admin_id``, and ``admin_name`` as it was, so the record reads the same after the account
is gone), when, what (``action``: ``grant_extension``, ``decline_extension``, ``add_user``,
``update_user``, ``update_profile`` …), on which object (``target_type``, ``target_id``) and
the details (never a password: only that it was reset).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Index, String
from sqlalchemy.orm import Mapped, mapped_column

from chatmem.store.base import Base
from chatmem.store.types import UTCDateTime, new_id, utcnow


class AdminAction(Base):
    __tablename__ = "admin_actions"
    __table_args__ = (Index("ix_admin_actions_created_at", "created_at"),)

    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_id)
    admin_id: Mapped[str | None] = mapped_column(String(32), nullable=True)
    admin_name: Mapped[str] = mapped_column(String(200))
    action: Mapped[str] = mapped_column(String(64))
    target_type: Mapped[str] = mapped_column(String(32))
    target_id: Mapped[str | None] = mapped_column(String(64), nullable=True)
    details: Mapped[dict[str, Any]] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
