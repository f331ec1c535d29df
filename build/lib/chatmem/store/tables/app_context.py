"""MCP Apps (APPS-3): the model context an app set for its conversation.

``app_contexts`` — at most one row per conversation: what the app of one of its tool calls
last sent with ``ui/update-model-context`` (its content blocks and ``structuredContent`` as
given), the text the model is sent for it (``chatmem.context.app_context``) and that text's
counts for every tokenizer, taken when it is stored (CTX-2: planning never counts it).  A new
update replaces the row; clearing deletes it; deleting the conversation deletes it.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, ForeignKey, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from chatmem.store.base import Base
from chatmem.store.types import UTCDateTime, utcnow


class AppContextRow(Base):
    __tablename__ = "app_contexts"

    conversation_id: Mapped[str] = mapped_column(
        ForeignKey("conversations.id", ondelete="CASCADE"), primary_key=True
    )
    #: chatmem's record of the call whose app set it (``tool_calls.id``).
    tool_call_id: Mapped[str] = mapped_column(String(32))
    tool: Mapped[str] = mapped_column(String(300))
    server_name: Mapped[str | None] = mapped_column(String(200), nullable=True)
    content: Mapped[list[Any]] = mapped_column(JSON)
    structured: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    text: Mapped[str] = mapped_column(Text)
    tokens_estimate: Mapped[int] = mapped_column(Integer)
    tokens_o200k: Mapped[int] = mapped_column(Integer)
    tokens_cl100k: Mapped[int] = mapped_column(Integer)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
