"""The keys an OpenAI client's request finds its conversation by (API-1, issue 29).

``history_keys`` — at most one row per conversation and ``kind``:

* ``seen``: a hash chain over the conversation's client view (what an OpenAI client was
  shown: :mod:`chatmem.turns.history_match`) without its trailing user and tool messages —
  what a client sends before its new messages, and what a retry of a failed answer sends;
* ``asked``: the chain over the whole view when it ends with the client's messages, awaiting
  the answer — a client that got the answer sends this chain plus the answer;
* ``client``: a conversation key the client chose itself (``X-Chatmem-Conversation``,
  ``metadata.conversation_id``, ``user: "conversation:…"``), unique per user.

``key`` carries its kind as a prefix (``s:``, ``a:``, ``c:``) so one index on
``(user_id, key)`` answers every lookup in one read.  Deleting the conversation deletes its
keys.  A key is a hint, never trusted: a hit is verified against the stored view first.
"""

from __future__ import annotations

from sqlalchemy import ForeignKey, Index, String, text
from sqlalchemy.orm import Mapped, mapped_column

from chatmem.store.base import Base


class HistoryKey(Base):
    __tablename__ = "history_keys"
    __table_args__ = (
        Index("ix_history_keys_user_key", "user_id", "key"),
        # A client's own key names one conversation of its user.
        Index(
            "uq_history_keys_client",
            "user_id",
            "key",
            unique=True,
            sqlite_where=text("kind = 'client'"),
            postgresql_where=text("kind = 'client'"),
        ),
    )

    conversation_id: Mapped[str] = mapped_column(
        ForeignKey("conversations.id", ondelete="CASCADE"), primary_key=True
    )
    kind: Mapped[str] = mapped_column(String(8), primary_key=True)
    user_id: Mapped[str] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    key: Mapped[str] = mapped_column(String(240))
