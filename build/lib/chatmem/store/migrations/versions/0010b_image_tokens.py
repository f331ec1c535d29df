"""A profile's flat cost per image (PROJ-2): ``profiles.image_tokens``, NULL for the provider's
formula (OpenAI's tile formula for OpenAI models, else a conservative flat cost).

Revision ID: 0010b_image_tokens
Revises: 0010_projects_images
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010b_image_tokens"
down_revision = "0010_projects_images"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("profiles") as batch:
        batch.add_column(sa.Column("image_tokens", sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("profiles") as batch:
        batch.drop_column("image_tokens")
