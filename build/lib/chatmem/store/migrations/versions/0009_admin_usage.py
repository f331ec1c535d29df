"""The admin console and enforced model locks (USE-4, USE-5).

- ``users.disabled`` (false), ``users.session_limit_usd`` / ``week_limit_usd`` (NULL: the
  deployment's limits).
- ``extension_requests``: the administrator's answer — ``status`` (existing requests stay
  ``pending``), ``amount_usd``, ``scope``, ``decided_by``, ``decided_at``.
- ``runs.answered_by`` / ``answered_reason``: which profile answered a turn, and why it is
  not the one chosen.
- ``profiles.auto_rank``: the order "Auto" tries shared profiles in.
- ``admin_actions``: every administrator's action, with who and when.

Revision ID: 0009_admin_usage
Revises: 0008_message_versions
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009_admin_usage"
down_revision = "0008_message_versions"
branch_labels = None
depends_on = None

REQUEST_COLUMNS = (
    ("amount_usd", sa.Float()),
    ("scope", sa.String(16)),
    ("decided_by", sa.String(32)),
    ("decided_at", sa.DateTime(timezone=True)),
)


def upgrade() -> None:
    # Plain ADD COLUMNs, never a batch "recreate": on SQLite a rebuilt ``users`` table is
    # dropped first, and with foreign keys on that DROP deletes every user's conversations
    # (ON DELETE CASCADE).  Each new column is nullable or has a constant default, which
    # SQLite's ALTER TABLE ADD COLUMN takes as it is.
    op.add_column(
        "users", sa.Column("disabled", sa.Boolean(), nullable=False, server_default=sa.false())
    )
    op.add_column("users", sa.Column("session_limit_usd", sa.Float(), nullable=True))
    op.add_column("users", sa.Column("week_limit_usd", sa.Float(), nullable=True))
    op.add_column(
        "extension_requests",
        sa.Column("status", sa.String(16), nullable=False, server_default="pending"),
    )
    for name, type_ in REQUEST_COLUMNS:
        op.add_column("extension_requests", sa.Column(name, type_, nullable=True))
    op.add_column("runs", sa.Column("answered_by", sa.String(64), nullable=True))
    op.add_column("runs", sa.Column("answered_reason", sa.String(32), nullable=True))
    op.add_column("profiles", sa.Column("auto_rank", sa.Integer(), nullable=True))
    op.create_table(
        "admin_actions",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("admin_id", sa.String(32), nullable=True),
        sa.Column("admin_name", sa.String(200), nullable=False),
        sa.Column("action", sa.String(64), nullable=False),
        sa.Column("target_type", sa.String(32), nullable=False),
        sa.Column("target_id", sa.String(64), nullable=True),
        sa.Column("details", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_admin_actions_created_at", "admin_actions", ["created_at"])


def downgrade() -> None:
    op.drop_index("ix_admin_actions_created_at", table_name="admin_actions")
    op.drop_table("admin_actions")
    with op.batch_alter_table("profiles") as batch:
        batch.drop_column("auto_rank")
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("answered_reason")
        batch.drop_column("answered_by")
    with op.batch_alter_table("extension_requests") as batch:
        for name, _ in reversed(REQUEST_COLUMNS):
            batch.drop_column(name)
        batch.drop_column("status")
    with op.batch_alter_table("users") as batch:
        batch.drop_column("week_limit_usd")
        batch.drop_column("session_limit_usd")
        batch.drop_column("disabled")
