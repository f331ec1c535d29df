"""Core schema: accounts, folders, conversations, messages, summaries, files, full-text search.

Revision ID: 0001_core
Revises: (none)

Full-text search is dialect-specific: SQLite gets an external-content FTS5 table over
``messages.content`` kept in sync by triggers (rowid = ``messages.num``); PostgreSQL gets a GIN
index on ``to_tsvector('simple', content)``.  The ``simple`` configuration (no stemming, no
stop words) behaves the same for every language, like FTS5's ``unicode61`` tokenizer.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001_core"
down_revision = None
branch_labels = None
depends_on = None

ID = sa.String(32)
TIME = sa.DateTime(timezone=True)
ROWID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def _fk(column: str, target: str, table: str, ondelete: str) -> sa.ForeignKeyConstraint:
    ref_table = target.split(".")[0]
    return sa.ForeignKeyConstraint(
        [column], [target], name=f"fk_{table}_{column}_{ref_table}", ondelete=ondelete
    )


def upgrade() -> None:
    op.create_table(
        "users",
        sa.Column("id", ID, nullable=False),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("password_hash", sa.Text(), nullable=True),
        sa.Column("is_admin", sa.Boolean(), nullable=False),
        sa.Column("evicted_conversations", sa.Integer(), nullable=False),
        sa.Column("evicted_messages", sa.Integer(), nullable=False),
        sa.Column("created_at", TIME, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_users"),
        sa.UniqueConstraint("name", name="uq_users_name"),
    )
    for table in ("api_tokens", "browser_sessions", "signin_links"):
        columns: list[sa.Column[object]] = [
            sa.Column("id", ID, nullable=False),
            sa.Column("user_id", ID, nullable=False),
            sa.Column("token_hash", sa.String(64), nullable=False),
            sa.Column("created_at", TIME, nullable=False),
        ]
        if table == "api_tokens":
            columns += [
                sa.Column("label", sa.String(200), nullable=False),
                sa.Column("last_used_at", TIME, nullable=True),
            ]
        elif table == "browser_sessions":
            columns += [
                sa.Column("csrf_token", sa.String(64), nullable=False),
                sa.Column("expires_at", TIME, nullable=False),
            ]
        else:
            columns += [
                sa.Column("expires_at", TIME, nullable=False),
                sa.Column("used_at", TIME, nullable=True),
            ]
        op.create_table(
            table,
            *columns,
            sa.PrimaryKeyConstraint("id", name=f"pk_{table}"),
            sa.UniqueConstraint("token_hash", name=f"uq_{table}_token_hash"),
            _fk("user_id", "users.id", table, "CASCADE"),
        )
        op.create_index(f"ix_{table}_user_id", table, ["user_id"])

    op.create_table(
        "folders",
        sa.Column("id", ID, nullable=False),
        sa.Column("user_id", ID, nullable=False),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("created_at", TIME, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_folders"),
        _fk("user_id", "users.id", "folders", "CASCADE"),
    )
    op.create_index("ix_folders_user_id", "folders", ["user_id"])

    op.create_table(
        "conversations",
        sa.Column("id", ID, nullable=False),
        sa.Column("user_id", ID, nullable=False),
        sa.Column("title", sa.String(500), nullable=False),
        sa.Column("folder_id", ID, nullable=True),
        sa.Column("pinned", sa.Boolean(), nullable=False),
        sa.Column("mode", sa.String(16), nullable=False),
        sa.Column("profile_id", sa.String(64), nullable=True),
        sa.Column("instructions", sa.Text(), nullable=False),
        sa.Column("source", sa.String(300), nullable=True),
        sa.Column("created_at", TIME, nullable=False),
        sa.Column("updated_at", TIME, nullable=False),
        sa.Column("last_active_at", TIME, nullable=False),
        sa.Column("archived_at", TIME, nullable=True),
        sa.Column("meta", sa.JSON(), nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_conversations"),
        sa.UniqueConstraint("user_id", "source", name="uq_conversations_user_id_source"),
        _fk("user_id", "users.id", "conversations", "CASCADE"),
        _fk("folder_id", "folders.id", "conversations", "SET NULL"),
    )
    op.create_index(
        "ix_conversations_list",
        "conversations",
        ["user_id", "archived_at", "pinned", "last_active_at", "id"],
    )
    op.create_index("ix_conversations_title", "conversations", ["user_id", "title", "id"])
    op.create_index("ix_conversations_folder_id", "conversations", ["folder_id"])

    op.create_table(
        "messages",
        sa.Column("num", ROWID, nullable=False, autoincrement=True),
        sa.Column("id", sa.String(64), nullable=False),
        sa.Column("conversation_id", ID, nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("content", sa.Text(), nullable=False),
        sa.Column("created_at", TIME, nullable=False),
        sa.Column("tokens_estimate", sa.Integer(), nullable=False),
        sa.Column("tokens_o200k", sa.Integer(), nullable=False),
        sa.Column("tokens_cl100k", sa.Integer(), nullable=False),
        sa.Column("tool_calls", sa.JSON(), nullable=True),
        sa.Column("tool_call_id", sa.String(200), nullable=True),
        sa.Column("excluded", sa.Boolean(), nullable=False),
        sa.Column("meta", sa.JSON(), nullable=True),
        sa.PrimaryKeyConstraint("num", name="pk_messages"),
        sa.UniqueConstraint("id", name="uq_messages_id"),
        sa.UniqueConstraint("conversation_id", "seq", name="uq_messages_conversation_id_seq"),
        _fk("conversation_id", "conversations.id", "messages", "CASCADE"),
    )

    # Full-text hits arrive as ``num``s; this covering index turns each into its conversation
    # without reading the (large) message row.
    op.create_index("ix_messages_num_conversation", "messages", ["num", "conversation_id"])

    op.create_table(
        "summaries",
        sa.Column("id", ID, nullable=False),
        sa.Column("conversation_id", ID, nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("first_message_id", sa.String(64), nullable=True),
        sa.Column("through_message_id", sa.String(64), nullable=False),
        sa.Column("message_count", sa.Integer(), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("focus", sa.Text(), nullable=True),
        sa.Column("cost", sa.Float(), nullable=False),
        sa.Column("model", sa.String(200), nullable=True),
        sa.Column("tokens_estimate", sa.Integer(), nullable=False),
        sa.Column("tokens_o200k", sa.Integer(), nullable=False),
        sa.Column("tokens_cl100k", sa.Integer(), nullable=False),
        sa.Column("created_at", TIME, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_summaries"),
        sa.UniqueConstraint(
            "conversation_id", "version", name="uq_summaries_conversation_id_version"
        ),
        _fk("conversation_id", "conversations.id", "summaries", "CASCADE"),
    )
    op.create_index("ix_summaries_conversation_id", "summaries", ["conversation_id"])

    op.create_table(
        "files",
        sa.Column("id", ID, nullable=False),
        sa.Column("conversation_id", ID, nullable=False),
        sa.Column("message_id", sa.String(64), nullable=True),
        sa.Column("name", sa.String(500), nullable=False),
        sa.Column("content", sa.Text(), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("size", sa.Integer(), nullable=False),
        sa.Column("tokens_estimate", sa.Integer(), nullable=False),
        sa.Column("tokens_o200k", sa.Integer(), nullable=False),
        sa.Column("tokens_cl100k", sa.Integer(), nullable=False),
        sa.Column("created_at", TIME, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_files"),
        _fk("conversation_id", "conversations.id", "files", "CASCADE"),
        _fk("message_id", "messages.id", "files", "SET NULL"),
    )
    op.create_index("ix_files_conversation_id", "files", ["conversation_id"])
    # Archive records (ARCH-1/2, owned by store/archive.py; model in tables/archives.py).
    op.create_table(
        "archives",
        sa.Column("conversation_id", ID, nullable=False),
        sa.Column("user_id", ID, nullable=False),
        sa.Column("storage", sa.String(16), nullable=False),
        sa.Column("sha256", sa.String(64), nullable=False),
        sa.Column("raw_bytes", sa.BigInteger(), nullable=False),
        sa.Column("stored_bytes", sa.BigInteger(), nullable=False),
        sa.Column("message_count", sa.Integer(), nullable=False),
        sa.Column("archived_at", TIME, nullable=False),
        sa.Column("blob", sa.LargeBinary(), nullable=True),
        sa.PrimaryKeyConstraint("conversation_id", name="pk_archives"),
        _fk("conversation_id", "conversations.id", "archives", "CASCADE"),
        _fk("user_id", "users.id", "archives", "CASCADE"),
    )
    op.create_index("ix_archives_user_id", "archives", ["user_id"])

    dialect = op.get_bind().dialect.name
    if dialect == "sqlite":
        for statement in _SQLITE_FTS:
            op.execute(statement)
    elif dialect == "postgresql":
        op.execute(
            "CREATE INDEX ix_messages_content_fts ON messages "
            "USING gin (to_tsvector('simple', content))"
        )


_SQLITE_FTS = (
    "CREATE VIRTUAL TABLE messages_fts USING fts5("
    "content, content='messages', content_rowid='num', "
    "tokenize='unicode61 remove_diacritics 2')",
    "CREATE TRIGGER messages_fts_ai AFTER INSERT ON messages BEGIN "
    "INSERT INTO messages_fts(rowid, content) VALUES (new.num, new.content); END",
    "CREATE TRIGGER messages_fts_ad AFTER DELETE ON messages BEGIN "
    "INSERT INTO messages_fts(messages_fts, rowid, content) "
    "VALUES ('delete', old.num, old.content); END",
    "CREATE TRIGGER messages_fts_au AFTER UPDATE OF content ON messages BEGIN "
    "INSERT INTO messages_fts(messages_fts, rowid, content) "
    "VALUES ('delete', old.num, old.content); "
    "INSERT INTO messages_fts(rowid, content) VALUES (new.num, new.content); END",
)


def downgrade() -> None:
    dialect = op.get_bind().dialect.name
    if dialect == "sqlite":
        for name in ("messages_fts_au", "messages_fts_ad", "messages_fts_ai"):
            op.execute(f"DROP TRIGGER IF EXISTS {name}")
        op.execute("DROP TABLE IF EXISTS messages_fts")
    for table in (
        "archives",
        "files",
        "summaries",
        "messages",
        "conversations",
        "folders",
        "signin_links",
        "browser_sessions",
        "api_tokens",
        "users",
    ):
        op.drop_table(table)
