"""Recall switches (issue 17): may the model look up what left its memory?

* ``conversations.recall`` and ``profiles.recall``: NULL follows the default (on in the
  ``economy`` and ``full`` memory modes, :func:`chatmem.context.recall.recall_enabled`);
  true or false is the user's choice.  The conversation's choice wins over its profile's.

Revision ID: 0012_recall
Revises: 0011b_lazy_counts
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012_recall"
down_revision = "0011b_lazy_counts"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("conversations") as batch:
        batch.add_column(sa.Column("recall", sa.Boolean(), nullable=True))
    with op.batch_alter_table("profiles") as batch:
        batch.add_column(sa.Column("recall", sa.Boolean(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("profiles") as batch:
        batch.drop_column("recall")
    with op.batch_alter_table("conversations") as batch:
        batch.drop_column("recall")
