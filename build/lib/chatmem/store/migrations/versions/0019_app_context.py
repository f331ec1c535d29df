"""An MCP App's model context per conversation (APPS-3).

* ``app_contexts``: conversation → the tool call whose app set it, the content as given, the
  text sent to the model and its counts for every tokenizer.
* ``conversations.has_app_context``: whether it has one (read with the row by a turn).

Revision ID: 0019_app_context
Revises: 0018_app_workspaces
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0019_app_context"
down_revision = "0018_app_workspaces"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "app_contexts",
        sa.Column(
            "conversation_id",
            sa.String(32),
            sa.ForeignKey("conversations.id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("tool_call_id", sa.String(32), nullable=False),
        sa.Column("tool", sa.String(300), nullable=False),
        sa.Column("server_name", sa.String(200), nullable=True),
        sa.Column("content", sa.JSON(), nullable=False),
        sa.Column("structured", sa.JSON(), nullable=True),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("tokens_estimate", sa.Integer(), nullable=False),
        sa.Column("tokens_o200k", sa.Integer(), nullable=False),
        sa.Column("tokens_cl100k", sa.Integer(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
    )
    # A plain ADD COLUMN (no table rebuild on SQLite): a constant default.
    op.add_column(
        "conversations",
        sa.Column("has_app_context", sa.Boolean(), nullable=False, server_default=sa.false()),
    )


def downgrade() -> None:
    with op.batch_alter_table("conversations") as batch:
        batch.drop_column("has_app_context")
    op.drop_table("app_contexts")
