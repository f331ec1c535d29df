"""Runs (turns), their stored events, tool calls, the usage ledger and extension requests.

- ``runs`` — one row per submitted turn (TURN-1).  ``replica_id`` + ``heartbeat_at`` say
  which process owns a running turn, so a restart (or another replica) can tell a dead owner
  and mark the run ``interrupted`` (TURN-3).  ``idempotency_key`` is unique per user
  (TURN-6): a retried submit finds the first run.
- ``run_events`` — the numbered events of a run (``delta``, ``tool_call`` … ``done``), kept
  with it so any client can replay them after the live log is gone.
- ``tool_calls`` — every MCP call with its status: ``started`` is written *before* the call,
  so a crash leaves evidence and the call is marked ``unknown``, never replayed.  An "ask
  first" call is written ``waiting`` and records the user's decision (PROV-6); each row
  says who (``user_id``), which server and tool, a SHA-256 digest of the arguments, the
  outcome and how long the call took — the administrators' list of tool calls.  MCP Apps
  (APPS-1, APPS-3): ``result_json`` keeps the whole ``CallToolResult`` as the server returned
  it (what an app reads: ``content`` and ``structuredContent``), ``app_uri`` the tool's app
  at the time of the call, and ``caller`` who made it — ``model`` in a turn (``run_id``), or
  ``app``: an app's own call, or "Open Live Workspace", outside any run (``run_id`` NULL).
- ``usage_ledger`` — one row per model call (answer, summary, compaction, probe) with the
  provider's reported tokens and the cost at the profile's prices (USE-1); ``estimated`` when
  the provider reported no usage and chatmem counted the call itself (PROV-1).  An
  ``overflow`` row records a request the provider refused as too long for its context and the
  token count it named (PROV-2): no cost, read only by the calibration (CTX-2).  No foreign
  key to the conversation: spending stays on record after a conversation is deleted.
- ``extension_requests`` — a user's "Request extension" (USE-3) and the administrator's
  answer (USE-5): ``status`` pending → granted / declined, who decided and when, and for a
  grant the amount and its scope (``period``: counts while the current session and week
  windows last; ``permanent``: always).
- ``runs.answered_by`` — the profile that answered (USE-4): the conversation's own, the
  fallback when the chosen one is locked, or Auto's pick; ``answered_reason`` says why it
  differs from the choice (``credits_exhausted``, ``auto``), NULL when it does not.
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
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import Mapped, mapped_column

from chatmem.store.base import Base
from chatmem.store.types import RowId, UTCDateTime, new_id, utcnow

RUN_STATUSES = ("running", "completed", "stopped", "interrupted", "failed")
TOOL_STATUSES = ("waiting", "started", "completed", "unknown", "failed", "refused", "not_run")
TOOL_DECISIONS = ("approved", "refused", "expired")
TOOL_CALLERS = ("model", "app")
USAGE_KINDS = ("answer", "summary", "compaction", "probe", "overflow")


class Run(Base):
    __tablename__ = "runs"
    __table_args__ = (
        UniqueConstraint("user_id", "idempotency_key", name="uq_runs_user_id_idempotency_key"),
        Index("ix_runs_conversation_status", "conversation_id", "status"),
        Index("ix_runs_status", "status"),
    )

    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_id)
    conversation_id: Mapped[str] = mapped_column(ForeignKey("conversations.id", ondelete="CASCADE"))
    user_id: Mapped[str] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    status: Mapped[str] = mapped_column(String(16), default="running")
    idempotency_key: Mapped[str | None] = mapped_column(String(200), nullable=True)
    user_message_id: Mapped[str | None] = mapped_column(String(64), nullable=True)
    profile_id: Mapped[str | None] = mapped_column(String(64), nullable=True)
    error_code: Mapped[str | None] = mapped_column(String(64), nullable=True)
    error_message: Mapped[str | None] = mapped_column(Text, nullable=True)
    note: Mapped[str | None] = mapped_column(Text, nullable=True)
    replica_id: Mapped[str | None] = mapped_column(String(64), nullable=True)
    heartbeat_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    last_seq: Mapped[int] = mapped_column(Integer, default=0)
    prompt_tokens: Mapped[int] = mapped_column(Integer, default=0)
    completion_tokens: Mapped[int] = mapped_column(Integer, default=0)
    cost: Mapped[float] = mapped_column(Float, default=0.0)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    #: PROV-6: the "ask first" tool call the run waits on (``tool_call_id``, ``name``,
    #: ``arguments``, ``server``), NULL otherwise.
    waiting: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    answered_by: Mapped[str | None] = mapped_column(String(64), nullable=True)
    answered_reason: Mapped[str | None] = mapped_column(String(32), nullable=True)


class RunEventRow(Base):
    __tablename__ = "run_events"

    run_id: Mapped[str] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True)
    seq: Mapped[int] = mapped_column(Integer, primary_key=True)
    type: Mapped[str] = mapped_column(String(32))
    data: Mapped[dict[str, Any]] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class ToolCallRow(Base):
    __tablename__ = "tool_calls"
    __table_args__ = (Index("ix_tool_calls_started_at", "started_at"),)

    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_id)
    run_id: Mapped[str | None] = mapped_column(
        ForeignKey("runs.id", ondelete="CASCADE"), index=True, nullable=True
    )
    conversation_id: Mapped[str] = mapped_column(String(32), index=True)
    call_id: Mapped[str] = mapped_column(String(200))  # the model's tool call id
    message_id: Mapped[str | None] = mapped_column(String(64), nullable=True)
    server_id: Mapped[str | None] = mapped_column(String(64), nullable=True)
    name: Mapped[str] = mapped_column(String(300))
    arguments: Mapped[str] = mapped_column(Text, default="{}")
    status: Mapped[str] = mapped_column(String(16), default="started")
    result: Mapped[str | None] = mapped_column(Text, nullable=True)
    started_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    # PROV-6: the record administrators read.
    user_id: Mapped[str | None] = mapped_column(String(32), nullable=True, index=True)
    server_name: Mapped[str | None] = mapped_column(String(200), nullable=True)
    tool: Mapped[str | None] = mapped_column(String(300), nullable=True)  # the server's name
    arguments_sha256: Mapped[str | None] = mapped_column(String(64), nullable=True)
    duration_ms: Mapped[int | None] = mapped_column(Integer, nullable=True)
    decision: Mapped[str | None] = mapped_column(String(16), nullable=True)
    decided_by: Mapped[str | None] = mapped_column(String(32), nullable=True)
    decided_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    # APPS-1, APPS-3: who called (``model``, ``app``), the tool's app, the whole result.
    caller: Mapped[str] = mapped_column(String(8), default="model", server_default="model")
    app_uri: Mapped[str | None] = mapped_column(String(1000), nullable=True)
    result_json: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)


class UsageRow(Base):
    __tablename__ = "usage_ledger"
    __table_args__ = (
        Index("ix_usage_ledger_user_created", "user_id", "created_at"),
        Index("ix_usage_ledger_conversation", "conversation_id"),
        Index("ix_usage_ledger_run", "run_id"),
        Index("ix_usage_ledger_profile", "profile_id", "num"),
    )

    num: Mapped[int] = mapped_column(RowId, primary_key=True, autoincrement=True)
    user_id: Mapped[str] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    conversation_id: Mapped[str | None] = mapped_column(String(32), nullable=True)
    run_id: Mapped[str | None] = mapped_column(String(32), nullable=True)
    kind: Mapped[str] = mapped_column(String(16))
    profile_id: Mapped[str | None] = mapped_column(String(64), nullable=True)
    model: Mapped[str | None] = mapped_column(String(200), nullable=True)
    prompt_tokens: Mapped[int] = mapped_column(Integer, default=0)
    completion_tokens: Mapped[int] = mapped_column(Integer, default=0)
    estimated_prompt_tokens: Mapped[int | None] = mapped_column(Integer, nullable=True)
    #: PROV-1: no usage came from the provider; the tokens were counted by chatmem.
    estimated: Mapped[bool] = mapped_column(Boolean, default=False)
    cost: Mapped[float] = mapped_column(Float, default=0.0)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class ExtensionRequest(Base):
    __tablename__ = "extension_requests"

    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_id)
    user_id: Mapped[str] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    reason: Mapped[str] = mapped_column(String(32), default="")
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    status: Mapped[str] = mapped_column(String(16), default="pending")
    amount_usd: Mapped[float | None] = mapped_column(Float, nullable=True)
    scope: Mapped[str | None] = mapped_column(String(16), nullable=True)
    decided_by: Mapped[str | None] = mapped_column(String(32), nullable=True)
    decided_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
