"""MCP Apps on a server's record (APPS-1, APPS-2, APPS-4).

* ``mcp_servers.show_apps`` (default true): the server's tools show their apps in the feed.
* ``mcp_servers.workspace_tool`` (NULL: none): the tool "Open Live Workspace" calls.
* ``mcp_servers.app_permissions`` (NULL: none): the browser permissions its apps may have.

Revision ID: 0015_apps_discovery
Revises: 0014_mcp_known_tools
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015_apps_discovery"
down_revision = "0014_mcp_known_tools"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("mcp_servers") as batch:
        batch.add_column(
            sa.Column("show_apps", sa.Boolean(), nullable=False, server_default=sa.true())
        )
        batch.add_column(sa.Column("workspace_tool", sa.String(300), nullable=True))
        batch.add_column(sa.Column("app_permissions", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("mcp_servers") as batch:
        batch.drop_column("app_permissions")
        batch.drop_column("workspace_tool")
        batch.drop_column("show_apps")
