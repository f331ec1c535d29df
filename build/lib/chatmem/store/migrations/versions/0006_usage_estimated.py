"""Usage rows counted by chatmem rather than reported by the provider (PROV-1).

``usage_ledger.estimated`` is true when the provider sent no usage for a call (llama.cpp
never does in a stream) and chatmem counted the prompt and the answer with the profile's
tokenizer; calibration (CTX-2) learns only from reported rows.  Existing rows were all
reported (or recorded as such): false.

Revision ID: 0006_usage_estimated
Revises: 0005_tool_policy
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006_usage_estimated"
down_revision = "0005_tool_policy"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("usage_ledger") as batch:
        batch.add_column(
            sa.Column("estimated", sa.Boolean(), nullable=False, server_default=sa.false())
        )


def downgrade() -> None:
    with op.batch_alter_table("usage_ledger") as batch:
        batch.drop_column("estimated")
