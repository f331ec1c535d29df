"""Runs, run events, tool calls, the usage ledger and extension requests (issue 5).

Revision ID: 0003_runs
Revises: 0002_profiles
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003_runs"
down_revision = "0002_profiles"
branch_labels = None
depends_on = None

ID = sa.String(32)
TIME = sa.DateTime(timezone=True)
ROWID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def _fk(column: str, target: str, table: str, ondelete: str) -> sa.ForeignKeyConstraint:
    ref_table = target.split(".")[0]
    return sa.ForeignKeyConstraint(
        [column], [target], name=f"fk_{table}_{column}_{ref_table}", ondelete=ondelete
    )


def upgrade() -> None:
    op.create_table(
        "runs",
        sa.Column("id", ID, nullable=False),
        sa.Column("conversation_id", ID, nullable=False),
        sa.Column("user_id", ID, nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("idempotency_key", sa.String(200), nullable=True),
        sa.Column("user_message_id", sa.String(64), nullable=True),
        sa.Column("profile_id", sa.String(64), nullable=True),
        sa.Column("error_code", sa.String(64), nullable=True),
        sa.Column("error_message", sa.Text(), nullable=True),
        sa.Column("note", sa.Text(), nullable=True),
        sa.Column("replica_id", sa.String(64), nullable=True),
        sa.Column("heartbeat_at", TIME, nullable=True),
        sa.Column("last_seq", sa.Integer(), nullable=False),
        sa.Column("prompt_tokens", sa.Integer(), nullable=False),
        sa.Column("completion_tokens", sa.Integer(), nullable=False),
        sa.Column("cost", sa.Float(), nullable=False),
        sa.Column("created_at", TIME, nullable=False),
        sa.Column("finished_at", TIME, nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_runs"),
        sa.UniqueConstraint("user_id", "idempotency_key", name="uq_runs_user_id_idempotency_key"),
        _fk("conversation_id", "conversations.id", "runs", "CASCADE"),
        _fk("user_id", "users.id", "runs", "CASCADE"),
    )
    op.create_index("ix_runs_conversation_status", "runs", ["conversation_id", "status"])
    op.create_index("ix_runs_status", "runs", ["status"])

    op.create_table(
        "run_events",
        sa.Column("run_id", ID, nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("type", sa.String(32), nullable=False),
        sa.Column("data", sa.JSON(), nullable=False),
        sa.Column("created_at", TIME, nullable=False),
        sa.PrimaryKeyConstraint("run_id", "seq", name="pk_run_events"),
        _fk("run_id", "runs.id", "run_events", "CASCADE"),
    )

    op.create_table(
        "tool_calls",
        sa.Column("id", ID, nullable=False),
        sa.Column("run_id", ID, nullable=False),
        sa.Column("conversation_id", ID, nullable=False),
        sa.Column("call_id", sa.String(200), nullable=False),
        sa.Column("message_id", sa.String(64), nullable=True),
        sa.Column("server_id", sa.String(64), nullable=True),
        sa.Column("name", sa.String(300), nullable=False),
        sa.Column("arguments", sa.Text(), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("result", sa.Text(), nullable=True),
        sa.Column("started_at", TIME, nullable=False),
        sa.Column("finished_at", TIME, nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_tool_calls"),
        _fk("run_id", "runs.id", "tool_calls", "CASCADE"),
    )
    op.create_index("ix_tool_calls_run_id", "tool_calls", ["run_id"])
    op.create_index("ix_tool_calls_conversation_id", "tool_calls", ["conversation_id"])

    op.create_table(
        "usage_ledger",
        sa.Column("num", ROWID, autoincrement=True, nullable=False),
        sa.Column("user_id", ID, nullable=False),
        sa.Column("conversation_id", ID, nullable=True),
        sa.Column("run_id", ID, nullable=True),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("profile_id", sa.String(64), nullable=True),
        sa.Column("model", sa.String(200), nullable=True),
        sa.Column("prompt_tokens", sa.Integer(), nullable=False),
        sa.Column("completion_tokens", sa.Integer(), nullable=False),
        sa.Column("estimated_prompt_tokens", sa.Integer(), nullable=True),
        sa.Column("cost", sa.Float(), nullable=False),
        sa.Column("created_at", TIME, nullable=False),
        sa.PrimaryKeyConstraint("num", name="pk_usage_ledger"),
        _fk("user_id", "users.id", "usage_ledger", "CASCADE"),
    )
    op.create_index("ix_usage_ledger_user_created", "usage_ledger", ["user_id", "created_at"])
    op.create_index("ix_usage_ledger_conversation", "usage_ledger", ["conversation_id"])
    op.create_index("ix_usage_ledger_run", "usage_ledger", ["run_id"])
    op.create_index("ix_usage_ledger_profile", "usage_ledger", ["profile_id", "num"])

    op.create_table(
        "extension_requests",
        sa.Column("id", ID, nullable=False),
        sa.Column("user_id", ID, nullable=False),
        sa.Column("reason", sa.String(32), nullable=False),
        sa.Column("created_at", TIME, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_extension_requests"),
        _fk("user_id", "users.id", "extension_requests", "CASCADE"),
    )
    op.create_index("ix_extension_requests_user_id", "extension_requests", ["user_id"])


def downgrade() -> None:
    op.drop_table("extension_requests")
    op.drop_table("usage_ledger")
    op.drop_table("tool_calls")
    op.drop_table("run_events")
    op.drop_table("runs")
