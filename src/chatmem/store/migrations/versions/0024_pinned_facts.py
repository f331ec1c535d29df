"""Pinned facts per conversation (CTX-24).

* ``pinned_facts``: conversation → each fact the user pinned, its text, the message it was
  picked from, when.
* ``pinned_fact_blocks``: conversation → the one message its facts are sent as and its counts
  for every tokenizer.
* ``conversations.has_pinned_facts``: whether it has any (read with the row by a turn).

Revision ID: 0024_pinned_facts
Revises: 0019_app_context
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0024_pinned_facts"
down_revision = "0023_summary_facts"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "pinned_facts",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column(
            "conversation_id",
            sa.String(32),
            sa.ForeignKey("conversations.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("message_id", sa.String(64), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index(
        "ix_pinned_facts_conversation", "pinned_facts", ["conversation_id", "created_at"]
    )
    op.create_table(
        "pinned_fact_blocks",
        sa.Column(
            "conversation_id",
            sa.String(32),
            sa.ForeignKey("conversations.id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("tokens_estimate", sa.Integer(), nullable=False),
        sa.Column("tokens_o200k", sa.Integer(), nullable=False),
        sa.Column("tokens_cl100k", sa.Integer(), nullable=False),
    )
    # A plain ADD COLUMN (no table rebuild on SQLite): a constant default.
    op.add_column(
        "conversations",
        sa.Column("has_pinned_facts", sa.Boolean(), nullable=False, server_default=sa.false()),
    )


def downgrade() -> None:
    with op.batch_alter_table("conversations") as batch:
        batch.drop_column("has_pinned_facts")
    op.drop_table("pinned_fact_blocks")
    op.drop_index("ix_pinned_facts_conversation", table_name="pinned_facts")
    op.drop_table("pinned_facts")
