"""Memory knobs per profile (CTX-22), summaries that cover nothing yet and conversations
continued from another one's summary (CTX-23).

A NULL knob means "the default" (``chatmem.context.values.Profile``), so a default that
changes reaches every profile that never set it.  An ``answer_reserve`` equal to the old
fixed default (4,096) becomes NULL: the new default depends on the window and leaves an
8K model usable.

Revision ID: 0004_memory_knobs
Revises: 0003_runs
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0004_memory_knobs"
down_revision = "0003_runs"
branch_labels = None
depends_on = None

KNOBS: tuple[tuple[str, sa.types.TypeEngine[Any]], ...] = (
    ("economy_pairs", sa.Integer()),
    ("economy_batch", sa.Integer()),
    ("full_threshold_fraction", sa.Float()),
    ("full_threshold_cap", sa.Integer()),
    ("full_keep_messages", sa.Integer()),
    ("window_messages", sa.Integer()),
    ("window_chars", sa.Integer()),
    ("instructions_role", sa.String(16)),
)


def upgrade() -> None:
    with op.batch_alter_table("profiles") as batch:
        for name, type_ in KNOBS:
            batch.add_column(sa.Column(name, type_, nullable=True))
        batch.alter_column("answer_reserve", existing_type=sa.Integer(), nullable=True)
    op.execute("UPDATE profiles SET answer_reserve = NULL WHERE answer_reserve = 4096")
    with op.batch_alter_table("summaries") as batch:
        batch.alter_column("through_message_id", existing_type=sa.String(64), nullable=True)
    with op.batch_alter_table("conversations") as batch:
        batch.add_column(sa.Column("source_conversation_id", sa.String(32), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("conversations") as batch:
        batch.drop_column("source_conversation_id")
    op.execute("DELETE FROM summaries WHERE through_message_id IS NULL")
    with op.batch_alter_table("summaries") as batch:
        batch.alter_column("through_message_id", existing_type=sa.String(64), nullable=False)
    op.execute("UPDATE profiles SET answer_reserve = 4096 WHERE answer_reserve IS NULL")
    with op.batch_alter_table("profiles") as batch:
        batch.alter_column("answer_reserve", existing_type=sa.Integer(), nullable=False)
        for name, _ in reversed(KNOBS):
            batch.drop_column(name)
