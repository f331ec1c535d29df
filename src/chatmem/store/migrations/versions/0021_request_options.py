"""A model profile's request parameters (issue 29).

* ``profiles.request_defaults`` (JSON, nullable): parameters such as ``temperature`` sent
  when the client sent none.
* ``profiles.request_pins`` (JSON, nullable): parameters sent whatever the client sent.

Both are checked by ``chatmem.models.request_options``; NULL is none.

Revision ID: 0021_request_options
Revises: 0019_app_context
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0021_request_options"
down_revision = "0020_history_keys"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("profiles") as batch:
        batch.add_column(sa.Column("request_defaults", sa.JSON(), nullable=True))
        batch.add_column(sa.Column("request_pins", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("profiles") as batch:
        batch.drop_column("request_pins")
        batch.drop_column("request_defaults")
