"""The interface language a user chose (PROJ-4).

* ``users.locale`` (NULL): one of the interface's languages ("en", "ru", "it", "id"); NULL
  means the browser's ``Accept-Language`` decides.

Revision ID: 0013_user_locale
Revises: 0012_recall
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013_user_locale"
down_revision = "0012_recall"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("users") as batch:
        batch.add_column(sa.Column("locale", sa.String(16), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("users") as batch:
        batch.drop_column("locale")
