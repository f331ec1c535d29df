"""The colour theme a user chose.

* ``users.theme`` (NULL): ``light`` or ``dark``; NULL means the system's setting
  (``prefers-color-scheme``) decides.

Revision ID: 0025_user_theme
Revises: 0019_app_context
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0025_user_theme"
down_revision = "0024_pinned_facts"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("users") as batch:
        batch.add_column(sa.Column("theme", sa.String(16), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("users") as batch:
        batch.drop_column("theme")
