"""The fact guard's record per summary version (CTX-24).

* ``summaries.facts``: JSON ``{"held", "kept", "dropped": [fact, ...], "dropped_count": n}``, each
  fact ``{"text", "kind", "message_id", "role", "at", "repeats"}``; NULL: the guard kept
  nothing (and versions written before it).

Revision ID: 0023_summary_facts
Revises: 0019_app_context
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0023_summary_facts"
down_revision = "0021_request_options"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # A plain ADD COLUMN (no table rebuild on SQLite): nullable, no default.
    op.add_column("summaries", sa.Column("facts", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("summaries") as batch:
        batch.drop_column("facts")
