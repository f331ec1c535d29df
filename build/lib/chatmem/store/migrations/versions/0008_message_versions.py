"""Versions of answers and questions (PROJ-3: regenerate, edit and resend).

* ``messages.hidden`` (false): a version not shown — kept, never sent, never planned — with
  a partial index over the hidden rows only, so the engine loader finds them in one probe.
* ``message_versions``: the versions of each slot (the answer to a question, or a question
  edited and sent again) and which one is shown.

Revision ID: 0008_message_versions
Revises: 0007_attachments_recount
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008_message_versions"
down_revision = "0007_attachments_recount"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # A plain ADD COLUMN (no batch rebuild): the messages table carries the FTS triggers.
    op.add_column(
        "messages", sa.Column("hidden", sa.Boolean(), nullable=False, server_default=sa.false())
    )
    op.create_index(
        "ix_messages_hidden",
        "messages",
        ["conversation_id", "seq"],
        sqlite_where=sa.text("hidden = 1"),
        postgresql_where=sa.text("hidden"),
    )
    op.create_table(
        "message_versions",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column(
            "conversation_id",
            sa.String(32),
            sa.ForeignKey("conversations.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("slot", sa.String(64), nullable=False),
        sa.Column("number", sa.Integer(), nullable=False),
        sa.Column("shown", sa.Boolean(), nullable=False),
        sa.Column("message_ids", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.UniqueConstraint(
            "conversation_id", "kind", "slot", "number", name="uq_message_versions_slot_number"
        ),
    )
    op.create_index("ix_message_versions_conversation_id", "message_versions", ["conversation_id"])


def downgrade() -> None:
    op.drop_index("ix_message_versions_conversation_id", table_name="message_versions")
    op.drop_table("message_versions")
    op.drop_index("ix_messages_hidden", table_name="messages")
    # Hidden versions go with the column: what stays is the history as shown.
    op.execute("DELETE FROM messages WHERE hidden")
    op.drop_column("messages", "hidden")  # no batch rebuild: the FTS triggers stay
