"""Projects (PROJ-1): a named group of conversations with shared instructions and files.

Design notes:
- A project belongs to one user (STORE-1).  Its conversations point at it
  (``conversations.project_id``, set to NULL when the project is deleted: the conversations
  stay, outside any project).
- A project's files are text, counted once at write time like conversation files (CTX-2).
  Each conversation of the project may pin or exclude a project file for itself
  (``project_file_states``; no row means ``auto``: sent with every request but in ``off``).
- ``updated_at`` changes with the instructions and with the files, so plans cached per
  conversation see a project change.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import ForeignKey, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from chatmem.store.base import Base
from chatmem.store.types import UTCDateTime, new_id, utcnow


class Project(Base):
    __tablename__ = "projects"

    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_id)
    user_id: Mapped[str] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    name: Mapped[str] = mapped_column(String(200))
    instructions: Mapped[str] = mapped_column(Text, default="")
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class ProjectFile(Base):
    __tablename__ = "project_files"

    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_id)
    project_id: Mapped[str] = mapped_column(
        ForeignKey("projects.id", ondelete="CASCADE"), index=True
    )
    name: Mapped[str] = mapped_column(String(500))
    content: Mapped[str] = mapped_column(Text)
    size: Mapped[int] = mapped_column(Integer, default=0)
    tokens_estimate: Mapped[int] = mapped_column(Integer, default=0)
    tokens_o200k: Mapped[int] = mapped_column(Integer, default=0)
    tokens_cl100k: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class ProjectFileState(Base):
    """A conversation's own state for one of its project's files (``pinned``/``excluded``)."""

    __tablename__ = "project_file_states"

    conversation_id: Mapped[str] = mapped_column(
        ForeignKey("conversations.id", ondelete="CASCADE"), primary_key=True
    )
    file_id: Mapped[str] = mapped_column(
        ForeignKey("project_files.id", ondelete="CASCADE"), primary_key=True, index=True
    )
    state: Mapped[str] = mapped_column(String(16))
