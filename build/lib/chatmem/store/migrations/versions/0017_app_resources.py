"""The apps' HTML as chatmem fetched it, per server and URI (APPS-1).

* ``app_resources``: (server, ``ui://`` URI) → the HTML, the server version it came with,
  what the resource declares (``ui``) and its size; ``html`` NULL when it was too large.

Revision ID: 0017_app_resources
Revises: 0016_tool_results
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0017_app_resources"
down_revision = "0016_tool_results"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "app_resources",
        sa.Column(
            "server_id",
            sa.String(32),
            sa.ForeignKey("mcp_servers.id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("uri", sa.String(1000), primary_key=True),
        sa.Column("server_version", sa.String(200), nullable=True),
        sa.Column("html", sa.Text(), nullable=True),
        sa.Column("ui", sa.JSON(), nullable=True),
        sa.Column("size", sa.Integer(), nullable=False),
        sa.Column("problem", sa.String(300), nullable=True),
        sa.Column("fetched_at", sa.DateTime(timezone=True), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("app_resources")
