"""Binary attachments (PROV-4), image input per profile (PROJ-2), and the estimate recounted
(CTX-1, issue 11).

* ``files.mime`` and ``files.data``: a tool's image or other binary result is stored as a
  file of its tool message (the bytes and their media type), not as base64 text.
* ``profiles.accepts_images`` (false): whether the model takes image input.
* The conservative estimate now counts one token per digit (and more for base64): every
  cached ``tokens_estimate`` of messages, summaries and files is counted again, in batches,
  with the estimate as installed (``chatmem.store.token_counts.recount_estimates``).  A downgrade
  keeps the new counts (they are the more conservative ones).

Revision ID: 0007_attachments_recount
Revises: 0006_usage_estimated
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007_attachments_recount"
down_revision = "0006_usage_estimated"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("files") as batch:
        batch.add_column(sa.Column("mime", sa.String(200), nullable=True))
        batch.add_column(sa.Column("data", sa.LargeBinary(), nullable=True))
    with op.batch_alter_table("profiles") as batch:
        batch.add_column(
            sa.Column("accepts_images", sa.Boolean(), nullable=False, server_default=sa.false())
        )
    from chatmem.store.token_counts import recount_estimates

    recount_estimates(op.get_bind())


def downgrade() -> None:
    op.execute("DELETE FROM files WHERE data IS NOT NULL")
    with op.batch_alter_table("profiles") as batch:
        batch.drop_column("accepts_images")
    with op.batch_alter_table("files") as batch:
        batch.drop_column("data")
        batch.drop_column("mime")
