"""Tool calls keep their whole result and their app (APPS-1, APPS-3).

* ``tool_calls.result_json`` (NULL: none kept): the ``CallToolResult`` as the server returned
  it — ``content`` and ``structuredContent`` — what a tool's app is fed.
* ``tool_calls.app_uri`` (NULL: no app): the ``ui://`` resource of the tool's app.
* ``tool_calls.caller`` (``model``): ``app`` for a call an app (or "Open Live Workspace")
  made, outside any run: ``tool_calls.run_id`` becomes nullable (on SQLite the batch rebuilds
  ``tool_calls``, a table no other table refers to).

Revision ID: 0016_tool_results
Revises: 0015_apps_discovery
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0016_tool_results"
down_revision = "0015_apps_discovery"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("tool_calls") as batch:
        batch.add_column(sa.Column("caller", sa.String(8), nullable=False, server_default="model"))
        batch.add_column(sa.Column("app_uri", sa.String(1000), nullable=True))
        batch.add_column(sa.Column("result_json", sa.JSON(), nullable=True))
        batch.alter_column("run_id", existing_type=sa.String(32), nullable=True)


def downgrade() -> None:
    op.execute("DELETE FROM tool_calls WHERE run_id IS NULL")
    with op.batch_alter_table("tool_calls") as batch:
        batch.alter_column("run_id", existing_type=sa.String(32), nullable=False)
        batch.drop_column("result_json")
        batch.drop_column("app_uri")
        batch.drop_column("caller")
