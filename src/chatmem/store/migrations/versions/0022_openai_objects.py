"""API-3: the Responses and Conversations APIs' own rows beside chatmem's.

* ``openai_responses``: a stored response (``resp_<run id>``) → its owner, conversation, the
  response it continued and the request fields its object echoes.
* ``openai_conversations``: a conversation's ``metadata`` as the Conversations API gave it.

Revision ID: 0022_openai_objects
Revises: 0021_request_options
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0022_openai_objects"
down_revision = "0025_user_theme"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "openai_responses",
        sa.Column(
            "run_id",
            sa.String(32),
            sa.ForeignKey("runs.id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column(
            "user_id", sa.String(32), sa.ForeignKey("users.id", ondelete="CASCADE"), nullable=False
        ),
        sa.Column(
            "conversation_id",
            sa.String(32),
            sa.ForeignKey("conversations.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("previous_run_id", sa.String(32), nullable=True),
        sa.Column("echo", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_openai_responses_conversation_id", "openai_responses", ["conversation_id"])
    op.create_table(
        "openai_conversations",
        sa.Column(
            "conversation_id",
            sa.String(32),
            sa.ForeignKey("conversations.id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("meta", sa.JSON(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("openai_conversations")
    op.drop_index("ix_openai_responses_conversation_id", "openai_responses")
    op.drop_table("openai_responses")
