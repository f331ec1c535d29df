"""Exact token counts counted when first needed (CTX-2, issue 16).

A message's exact counts (``tokens_o200k``, ``tokens_cl100k``) are computed at write time only
for the tokenizers some profile names; the others are stored as -1 (``chatmem.store.token_counts.
UNCOUNTED``) and counted once, the first time a plan needs them.  Two partial indexes hold
just those rows, so the loader's "anything left to count in this conversation?" costs an
empty index probe.  No existing row changes (every stored count is a real one).

Revision ID: 0011b_lazy_counts
Revises: 0011_search_index
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011b_lazy_counts"
down_revision = "0011_search_index"
branch_labels = None
depends_on = None

INDEXES = {
    "ix_messages_uncounted_o200k": "tokens_o200k < 0",
    "ix_messages_uncounted_cl100k": "tokens_cl100k < 0",
}


def upgrade() -> None:
    for name, condition in INDEXES.items():
        op.create_index(
            name,
            "messages",
            ["conversation_id"],
            sqlite_where=sa.text(condition),
            postgresql_where=sa.text(condition),
        )


def downgrade() -> None:
    for name in INDEXES:
        op.drop_index(name, table_name="messages")
