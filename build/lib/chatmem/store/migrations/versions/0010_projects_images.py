"""Projects (PROJ-1) and image attachments (PROJ-2).

* ``projects``, ``project_files`` and ``project_file_states`` (a conversation's own pin or
  exclusion of a project file); ``conversations.project_id`` — without a foreign key (on
  SQLite one could only be added by rebuilding ``conversations``, whose drop would cascade to
  its messages); deleting a project clears it in code.
* ``files.width`` and ``files.height``: an image's size in pixels, read from its header.

Revision ID: 0010_projects_images
Revises: 0009_admin_usage
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010_projects_images"
down_revision = "0009_admin_usage"
branch_labels = None
depends_on = None

ID = sa.String(32)
TIME = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "projects",
        sa.Column("id", ID, nullable=False),
        sa.Column("user_id", ID, nullable=False),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("instructions", sa.Text(), nullable=False),
        sa.Column("created_at", TIME, nullable=False),
        sa.Column("updated_at", TIME, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_projects"),
        sa.ForeignKeyConstraint(
            ["user_id"], ["users.id"], name="fk_projects_user_id_users", ondelete="CASCADE"
        ),
    )
    op.create_index("ix_projects_user_id", "projects", ["user_id"])
    op.create_table(
        "project_files",
        sa.Column("id", ID, nullable=False),
        sa.Column("project_id", ID, nullable=False),
        sa.Column("name", sa.String(500), nullable=False),
        sa.Column("content", sa.Text(), nullable=False),
        sa.Column("size", sa.Integer(), nullable=False),
        sa.Column("tokens_estimate", sa.Integer(), nullable=False),
        sa.Column("tokens_o200k", sa.Integer(), nullable=False),
        sa.Column("tokens_cl100k", sa.Integer(), nullable=False),
        sa.Column("created_at", TIME, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_project_files"),
        sa.ForeignKeyConstraint(
            ["project_id"],
            ["projects.id"],
            name="fk_project_files_project_id_projects",
            ondelete="CASCADE",
        ),
    )
    op.create_index("ix_project_files_project_id", "project_files", ["project_id"])
    op.create_table(
        "project_file_states",
        sa.Column("conversation_id", ID, nullable=False),
        sa.Column("file_id", ID, nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.PrimaryKeyConstraint("conversation_id", "file_id", name="pk_project_file_states"),
        sa.ForeignKeyConstraint(
            ["conversation_id"],
            ["conversations.id"],
            name="fk_project_file_states_conversation_id_conversations",
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["file_id"],
            ["project_files.id"],
            name="fk_project_file_states_file_id_project_files",
            ondelete="CASCADE",
        ),
    )
    op.create_index("ix_project_file_states_file_id", "project_file_states", ["file_id"])
    with op.batch_alter_table("conversations") as batch:
        batch.add_column(sa.Column("project_id", ID, nullable=True))
    op.create_index("ix_conversations_project_id", "conversations", ["project_id"])
    with op.batch_alter_table("files") as batch:
        batch.add_column(sa.Column("width", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("height", sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("files") as batch:
        batch.drop_column("height")
        batch.drop_column("width")
    op.drop_index("ix_conversations_project_id", table_name="conversations")
    # Not a batch: a rebuild of ``conversations`` on SQLite would cascade to its messages.
    op.execute("ALTER TABLE conversations DROP COLUMN project_id")
    op.drop_table("project_file_states")
    op.drop_table("project_files")
    op.drop_table("projects")
