"""Model profiles and MCP servers (encrypted secrets).

Revision ID: 0002_profiles
Revises: 0001_core
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002_profiles"
down_revision = "0001_core"
branch_labels = None
depends_on = None

ID = sa.String(32)
TIME = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "profiles",
        sa.Column("id", ID, nullable=False),
        sa.Column("user_id", ID, nullable=True),
        sa.Column("shared", sa.Boolean(), nullable=False),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("base_url", sa.Text(), nullable=False),
        sa.Column("model", sa.String(200), nullable=False),
        sa.Column("api_key_ciphertext", sa.LargeBinary(), nullable=True),
        sa.Column("context_window", sa.Integer(), nullable=False),
        sa.Column("answer_reserve", sa.Integer(), nullable=False),
        sa.Column("tokenizer", sa.String(20), nullable=False),
        sa.Column("input_price_per_mtok", sa.Float(), nullable=True),
        sa.Column("output_price_per_mtok", sa.Float(), nullable=True),
        sa.Column("free", sa.Boolean(), nullable=False),
        sa.Column("stateless", sa.Boolean(), nullable=False),
        sa.Column("summarizer_profile_id", ID, nullable=True),
        sa.Column("created_at", TIME, nullable=False),
        sa.Column("updated_at", TIME, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_profiles"),
        sa.ForeignKeyConstraint(
            ["user_id"], ["users.id"], name="fk_profiles_user_id_users", ondelete="SET NULL"
        ),
    )
    op.create_index("ix_profiles_user_id", "profiles", ["user_id"])
    op.create_table(
        "mcp_servers",
        sa.Column("id", ID, nullable=False),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("url", sa.Text(), nullable=False),
        sa.Column("headers_ciphertext", sa.LargeBinary(), nullable=True),
        sa.Column("enabled", sa.Boolean(), nullable=False),
        sa.Column("created_at", TIME, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_mcp_servers"),
        sa.UniqueConstraint("name", name="uq_mcp_servers_name"),
    )


def downgrade() -> None:
    op.drop_table("mcp_servers")
    op.drop_index("ix_profiles_user_id", table_name="profiles")
    op.drop_table("profiles")
