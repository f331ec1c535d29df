"""Pinned facts (CTX-24): what the user asked the model to always remember.

``pinned_facts`` — the facts of a conversation, one row each, oldest first (``created_at``,
then ``id``): the text as the user wrote or picked it and, when it was picked from a message
(a selection, or a kept fact of the summary), that message's id.

``pinned_fact_blocks`` — at most one row per conversation: the one message its facts are sent
as (``chatmem.context.pinned_facts``) and that text's counts for every tokenizer, taken when a
fact is added, edited or deleted (CTX-2: planning never counts it).  Deleting the conversation
deletes both.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import ForeignKey, Index, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from chatmem.store.base import Base
from chatmem.store.types import UTCDateTime, new_id, utcnow


class PinnedFactRow(Base):
    __tablename__ = "pinned_facts"
    __table_args__ = (Index("ix_pinned_facts_conversation", "conversation_id", "created_at"),)

    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_id)
    conversation_id: Mapped[str] = mapped_column(ForeignKey("conversations.id", ondelete="CASCADE"))
    text: Mapped[str] = mapped_column(Text)
    #: The message it was picked from (no foreign key: the fact outlives a deleted message).
    message_id: Mapped[str | None] = mapped_column(String(64), nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class PinnedFactBlockRow(Base):
    __tablename__ = "pinned_fact_blocks"

    conversation_id: Mapped[str] = mapped_column(
        ForeignKey("conversations.id", ondelete="CASCADE"), primary_key=True
    )
    text: Mapped[str] = mapped_column(Text)
    tokens_estimate: Mapped[int] = mapped_column(Integer)
    tokens_o200k: Mapped[int] = mapped_column(Integer)
    tokens_cl100k: Mapped[int] = mapped_column(Integer)
