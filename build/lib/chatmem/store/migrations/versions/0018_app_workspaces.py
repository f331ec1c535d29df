"""The Live Workspace of a conversation (APPS-4).

* ``app_workspaces``: conversation → the recorded tool call whose app it keeps open.

Revision ID: 0018_app_workspaces
Revises: 0017_app_resources
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0018_app_workspaces"
down_revision = "0017_app_resources"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "app_workspaces",
        sa.Column(
            "conversation_id",
            sa.String(32),
            sa.ForeignKey("conversations.id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("tool_call_id", sa.String(32), nullable=False),
        sa.Column("opened_at", sa.DateTime(timezone=True), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("app_workspaces")
