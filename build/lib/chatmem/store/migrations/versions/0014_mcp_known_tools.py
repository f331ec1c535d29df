"""Each MCP server's last known tool list (seed 003: the conservative estimate counts the
tool definitions before the first turn lists them).

* ``mcp_servers.known_tools`` (NULL: never listed): the tools the server last listed — name,
  description and input schema each, what the model is sent of them.
* ``mcp_servers.tools_listed_at`` (NULL: never): when that list was last listed.

Revision ID: 0014_mcp_known_tools
Revises: 0013_user_locale
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014_mcp_known_tools"
down_revision = "0013_user_locale"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("mcp_servers") as batch:
        batch.add_column(sa.Column("known_tools", sa.JSON(), nullable=True))
        batch.add_column(sa.Column("tools_listed_at", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("mcp_servers") as batch:
        batch.drop_column("tools_listed_at")
        batch.drop_column("known_tools")
