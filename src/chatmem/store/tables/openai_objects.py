"""API-3: what OpenAI's Responses and Conversations APIs keep beside chatmem's own rows.

``openai_responses`` — one row per stored response (``POST /v1/responses``): the run that
answered it (the response's id is ``resp_<run id>``), its owner and conversation, the
response it continued (``previous_response_id``) and the request fields a response object
echoes back (``instructions``, ``metadata``, ``tools``, ``text`` …).  The output, the status
and the usage are the run's (its stored events): not copied here.  ``DELETE
/v1/responses/{id}`` deletes the row; the run and the conversation's messages stay.

``openai_conversations`` — a conversation's ``metadata`` as ``POST /v1/conversations``
gave it (a conversation without a row has none).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, ForeignKey, String
from sqlalchemy.orm import Mapped, mapped_column

from chatmem.store.base import Base
from chatmem.store.types import UTCDateTime, utcnow


class ResponseRow(Base):
    __tablename__ = "openai_responses"

    run_id: Mapped[str] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True)
    user_id: Mapped[str] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    conversation_id: Mapped[str] = mapped_column(
        ForeignKey("conversations.id", ondelete="CASCADE"), index=True
    )
    #: The run id of the response this one continued (not a foreign key: it may be deleted).
    previous_run_id: Mapped[str | None] = mapped_column(String(32), nullable=True)
    #: The request's fields the response object echoes (``instructions``, ``tools`` …).
    echo: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class ApiConversationRow(Base):
    __tablename__ = "openai_conversations"

    conversation_id: Mapped[str] = mapped_column(
        ForeignKey("conversations.id", ondelete="CASCADE"), primary_key=True
    )
    meta: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
