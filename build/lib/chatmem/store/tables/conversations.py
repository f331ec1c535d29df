"""Folders, conversations, messages, summaries and files (STORE-2, STORE-3, CTX-9, CTX-16).

Design notes:
- Messages carry a per-conversation ``seq`` (1, 2, 3 …) that orders history; the
  ``(conversation_id, seq)`` index lets the engine loader read the tail in pages without
  touching old rows.  ``num`` is an integer surrogate key: it is SQLite's rowid (stable across
  VACUUM), which the FTS5 index ``messages_fts`` points at; the public id is ``id``.
- Token counts are computed once at write time for every tokenizer we know (CTX-2) and kept
  in ``tokens_<tokenizer>`` columns; the engine gets the one its profile asks for.
- Summaries are never overwritten: every version is a row (STORE-2: history stays whole).
- Files are text (``content``, counted) or binary attachments (``data`` with its ``mime``,
  PROV-4): a tool's image is stored as a file of its tool message, never as base64 text.
- ``hidden`` marks a version not shown (PROJ-3: a regenerated answer, an edited question);
  ``message_versions`` says which versions each slot has and which one it shows
  (:mod:`chatmem.store.versions`).
- ``archived_at`` marks a conversation moved to an archive file (ARCH-1); archived
  conversations leave lists and search.  ``source`` is the import key (``chatgpt:<id>``, …) so
  re-importing a file does not duplicate conversations.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    Boolean,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    String,
    Text,
    UniqueConstraint,
    false,
    text,
)
from sqlalchemy.orm import Mapped, mapped_column

from chatmem.store.base import Base
from chatmem.store.types import RowId, UTCDateTime, new_id, utcnow

# Names of the token-count columns, by tokenizer name (CTX-1).
TOKEN_COLUMNS: dict[str, str] = {
    "estimate": "tokens_estimate",
    "o200k_base": "tokens_o200k",
    "cl100k_base": "tokens_cl100k",
}


class Folder(Base):
    __tablename__ = "folders"

    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_id)
    user_id: Mapped[str] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    name: Mapped[str] = mapped_column(String(200))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class Conversation(Base):
    __tablename__ = "conversations"
    __table_args__ = (
        # The list order: pinned first, then most recently active (STORE-7, kept fast by keyset).
        # ``archived_at IS NULL`` is an equality for the planner, so the list is an index walk
        # and search can test ids against its candidate set without touching rows.
        Index("ix_conversations_list", "user_id", "archived_at", "pinned", "last_active_at", "id"),
        # Titles are searched through their full-text index (migration 0011_search_index).
        UniqueConstraint("user_id", "source", name="uq_conversations_user_id_source"),
    )

    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_id)
    user_id: Mapped[str] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    title: Mapped[str] = mapped_column(String(500), default="")
    folder_id: Mapped[str | None] = mapped_column(
        ForeignKey("folders.id", ondelete="SET NULL"), nullable=True, index=True
    )
    pinned: Mapped[bool] = mapped_column(Boolean, default=False)
    mode: Mapped[str] = mapped_column(String(16), default="full")
    profile_id: Mapped[str | None] = mapped_column(String(64), nullable=True)
    instructions: Mapped[str] = mapped_column(Text, default="")
    source: Mapped[str | None] = mapped_column(String(300), nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    last_active_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    archived_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    # CTX-23: the conversation this one continues from ("Continue in a new chat").
    source_conversation_id: Mapped[str | None] = mapped_column(String(32), nullable=True)
    # Issue 17: the model may look up what left its memory (``recall``); NULL: the
    # profile's choice, else the mode's default (``chatmem.context.recall``).
    recall: Mapped[bool | None] = mapped_column(Boolean, nullable=True)
    # PROJ-1: the project whose instructions and files every request of this one carries.
    # No foreign key (as ``profile_id``): deleting a project clears it in code, and SQLite
    # could only add one by rebuilding this table.
    project_id: Mapped[str | None] = mapped_column(String(32), nullable=True, index=True)
    # Extras carried through export/import (e.g. an imported export's non-secret ``profile``
    # settings when no local profile is linked); owned by store/exchange.
    meta: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    # APPS-3: an app set a model context (``app_contexts``): read with the row, so a turn of a
    # conversation without one never asks for it.
    has_app_context: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    # CTX-24: the user pinned facts (``pinned_facts``): read with the row, so a turn of a
    # conversation without any never asks for them.
    has_pinned_facts: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())


class Message(Base):
    __tablename__ = "messages"
    __table_args__ = (
        UniqueConstraint("conversation_id", "seq", name="uq_messages_conversation_id_seq"),
        # Search: full-text hit (num) → conversation without reading the message row.
        Index("ix_messages_num_conversation", "num", "conversation_id"),
        # Issue 16: exact counts left to count when first needed (chatmem.store.token_counts).
        *(
            Index(
                f"ix_messages_uncounted_{name}",
                "conversation_id",
                sqlite_where=text(f"tokens_{name} < 0"),
                postgresql_where=text(f"tokens_{name} < 0"),
            )
            for name in ("o200k", "cl100k")
        ),
        # PROJ-3: the few hidden versions of a conversation, found without touching the rest
        # (the engine loader skips them by arithmetic on ``seq``, chatmem.store.engine).
        Index(
            "ix_messages_hidden",
            "conversation_id",
            "seq",
            sqlite_where=text("hidden = 1"),
            postgresql_where=text("hidden"),
        ),
    )

    num: Mapped[int] = mapped_column(RowId, primary_key=True, autoincrement=True)
    id: Mapped[str] = mapped_column(String(64), unique=True, default=new_id)
    conversation_id: Mapped[str] = mapped_column(ForeignKey("conversations.id", ondelete="CASCADE"))
    seq: Mapped[int] = mapped_column(Integer)
    role: Mapped[str] = mapped_column(String(16))
    content: Mapped[str] = mapped_column(Text, default="")
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    tokens_estimate: Mapped[int] = mapped_column(Integer, default=0)
    tokens_o200k: Mapped[int] = mapped_column(Integer, default=0)
    tokens_cl100k: Mapped[int] = mapped_column(Integer, default=0)
    # Assistant tool calls, OpenAI shape: [{"id", "name", "arguments"}].
    tool_calls: Mapped[list[dict[str, Any]] | None] = mapped_column(JSON, nullable=True)
    tool_call_id: Mapped[str | None] = mapped_column(String(200), nullable=True)
    excluded: Mapped[bool] = mapped_column(Boolean, default=False)
    # Free-form extras (run id, usage, tool status …) owned by whoever writes them.
    meta: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    # PROJ-3: a version not shown (a regenerated answer, an edited question): kept, never
    # sent, never in the plan (:mod:`chatmem.store.versions`).
    hidden: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())


class MessageVersion(Base):
    """PROJ-3: one version of a *slot* — the answer to a question (``kind`` "answer",
    ``slot`` the question's id) or a question edited and sent again (``kind`` "question",
    ``slot`` the first question's id).  Exactly one version of a slot is ``shown``; the
    messages of the others are ``hidden``.  ``message_ids`` are the version's messages as
    they were when it was last hidden (a shown version's are the visible answers of its
    question; a question version holds just the question)."""

    __tablename__ = "message_versions"
    __table_args__ = (
        UniqueConstraint(
            "conversation_id", "kind", "slot", "number", name="uq_message_versions_slot_number"
        ),
    )

    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_id)
    conversation_id: Mapped[str] = mapped_column(
        ForeignKey("conversations.id", ondelete="CASCADE"), index=True
    )
    kind: Mapped[str] = mapped_column(String(16))
    slot: Mapped[str] = mapped_column(String(64))
    number: Mapped[int] = mapped_column(Integer)
    shown: Mapped[bool] = mapped_column(Boolean, default=False)
    message_ids: Mapped[list[str]] = mapped_column(JSON, default=list)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class Summary(Base):
    __tablename__ = "summaries"
    __table_args__ = (
        UniqueConstraint("conversation_id", "version", name="uq_summaries_conversation_id_version"),
    )

    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_id)
    conversation_id: Mapped[str] = mapped_column(
        ForeignKey("conversations.id", ondelete="CASCADE"), index=True
    )
    version: Mapped[int] = mapped_column(Integer)
    first_message_id: Mapped[str | None] = mapped_column(String(64), nullable=True)
    # NULL: a summary carried into a new conversation (CTX-23), covering none of its messages.
    through_message_id: Mapped[str | None] = mapped_column(String(64), nullable=True)
    message_count: Mapped[int] = mapped_column(Integer, default=0)
    text: Mapped[str] = mapped_column(Text)
    focus: Mapped[str | None] = mapped_column(Text, nullable=True)
    cost: Mapped[float] = mapped_column(Float, default=0.0)
    model: Mapped[str | None] = mapped_column(String(200), nullable=True)
    tokens_estimate: Mapped[int] = mapped_column(Integer, default=0)
    tokens_o200k: Mapped[int] = mapped_column(Integer, default=0)
    tokens_cl100k: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    # CTX-24: the fact guard's record (:mod:`chatmem.store.fact_records`); NULL: none.
    facts: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)


class File(Base):
    __tablename__ = "files"

    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_id)
    conversation_id: Mapped[str] = mapped_column(
        ForeignKey("conversations.id", ondelete="CASCADE"), index=True
    )
    message_id: Mapped[str | None] = mapped_column(
        ForeignKey("messages.id", ondelete="SET NULL"), nullable=True
    )
    name: Mapped[str] = mapped_column(String(500))
    content: Mapped[str] = mapped_column(Text)
    state: Mapped[str] = mapped_column(String(16), default="auto")
    size: Mapped[int] = mapped_column(Integer, default=0)
    # PROV-4: a binary attachment (an image or other blob a tool returned) keeps its bytes
    # and media type here and an empty ``content``; NULL for text files.  Deferred: lists and
    # plans never load the bytes, only ``GET /api/v1/files/{id}/content`` does.
    mime: Mapped[str | None] = mapped_column(String(200), nullable=True)
    data: Mapped[bytes | None] = mapped_column(LargeBinary, nullable=True, deferred=True)
    # PROJ-2: an image's size in pixels, read from its header when stored (the plan counts
    # its tokens from these without loading the bytes); NULL for anything else.
    width: Mapped[int | None] = mapped_column(Integer, nullable=True)
    height: Mapped[int | None] = mapped_column(Integer, nullable=True)
    tokens_estimate: Mapped[int] = mapped_column(Integer, default=0)
    tokens_o200k: Mapped[int] = mapped_column(Integer, default=0)
    tokens_cl100k: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
