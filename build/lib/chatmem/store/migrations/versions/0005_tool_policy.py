"""Tool policy and the tool-call record (PROV-3, PROV-6).

- ``mcp_servers``: per-server connect and call timeouts (NULL: the settings), the allow-list
  of tools offered (NULL: all) and the tools the user approves first.
- ``runs.waiting``: the "ask first" call a running turn waits on.
- ``tool_calls``: who made the call, the server's and the tool's own names, a SHA-256 digest
  of the arguments, the duration and the user's decision, for the administrators' list.
  Existing rows get their user from their run and the digest of their stored arguments.

Revision ID: 0005_tool_policy
Revises: 0004_memory_knobs
"""

from __future__ import annotations

import hashlib

import sqlalchemy as sa
from alembic import op

revision = "0005_tool_policy"
down_revision = "0004_memory_knobs"
branch_labels = None
depends_on = None

TOOL_CALL_COLUMNS = (
    ("user_id", sa.String(32)),
    ("server_name", sa.String(200)),
    ("tool", sa.String(300)),
    ("arguments_sha256", sa.String(64)),
    ("duration_ms", sa.Integer()),
    ("decision", sa.String(16)),
    ("decided_by", sa.String(32)),
    ("decided_at", sa.DateTime(timezone=True)),
)


def upgrade() -> None:
    with op.batch_alter_table("mcp_servers") as batch:
        batch.add_column(sa.Column("connect_timeout", sa.Float(), nullable=True))
        batch.add_column(sa.Column("call_timeout", sa.Float(), nullable=True))
        batch.add_column(sa.Column("allowed_tools", sa.JSON(), nullable=True))
        batch.add_column(sa.Column("ask_first_tools", sa.JSON(), nullable=True))
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("waiting", sa.JSON(), nullable=True))
    with op.batch_alter_table("tool_calls") as batch:
        for name, type_ in TOOL_CALL_COLUMNS:
            batch.add_column(sa.Column(name, type_, nullable=True))
    op.create_index("ix_tool_calls_user_id", "tool_calls", ["user_id"])
    op.create_index("ix_tool_calls_started_at", "tool_calls", ["started_at"])
    _backfill()


def _backfill() -> None:
    bind = op.get_bind()
    bind.execute(
        sa.text(
            "UPDATE tool_calls SET user_id = "
            "(SELECT runs.user_id FROM runs WHERE runs.id = tool_calls.run_id)"
        )
    )
    rows = bind.execute(sa.text("SELECT id, arguments FROM tool_calls")).all()
    update = sa.text("UPDATE tool_calls SET arguments_sha256 = :digest WHERE id = :id")
    for row_id, arguments in rows:
        digest = hashlib.sha256((arguments or "").encode("utf-8")).hexdigest()
        bind.execute(update, {"digest": digest, "id": row_id})


def downgrade() -> None:
    op.drop_index("ix_tool_calls_started_at", table_name="tool_calls")
    op.drop_index("ix_tool_calls_user_id", table_name="tool_calls")
    with op.batch_alter_table("tool_calls") as batch:
        for name, _ in reversed(TOOL_CALL_COLUMNS):
            batch.drop_column(name)
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("waiting")
    with op.batch_alter_table("mcp_servers") as batch:
        for name in ("ask_first_tools", "allowed_tools", "call_timeout", "connect_timeout"):
            batch.drop_column(name)
