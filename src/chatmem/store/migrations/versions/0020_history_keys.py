"""The history index (API-1, issue 29): ``history_keys``, the keys an OpenAI client's request
finds its conversation by when it names none, and a client's own conversation keys.

Every existing conversation is indexed here (:func:`chatmem.store.history_keys.backfill`:
one read of each conversation's shown messages), so a client that was sending its whole
history before the upgrade continues its latest copy afterwards.

Revision ID: 0020_history_keys
Revises: 0019_app_context
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0020_history_keys"
down_revision = "0019_app_context"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "history_keys",
        sa.Column(
            "conversation_id",
            sa.String(32),
            sa.ForeignKey("conversations.id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("kind", sa.String(8), primary_key=True),
        sa.Column(
            "user_id", sa.String(32), sa.ForeignKey("users.id", ondelete="CASCADE"), nullable=False
        ),
        sa.Column("key", sa.String(240), nullable=False),
    )
    op.create_index("ix_history_keys_user_key", "history_keys", ["user_id", "key"])
    op.create_index(
        "uq_history_keys_client",
        "history_keys",
        ["user_id", "key"],
        unique=True,
        sqlite_where=sa.text("kind = 'client'"),
        postgresql_where=sa.text("kind = 'client'"),
    )
    from chatmem.store.history_keys import backfill

    backfill(op.get_bind())


def downgrade() -> None:
    op.drop_index("uq_history_keys_client", table_name="history_keys")
    op.drop_index("ix_history_keys_user_key", table_name="history_keys")
    op.drop_table("history_keys")
