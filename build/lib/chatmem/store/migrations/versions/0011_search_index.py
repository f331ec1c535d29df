"""Conversation titles get a full-text index (STORE-7, issue 16): search starts from indexes.

Before, a title matched as a substring: ``title LIKE '%q%'`` read every title of the user
(ix_conversations_title), some 6 ms at 50,000 conversations, on every search.  Now titles
match like message content — every word, the last one as a prefix — from an index:

* SQLite: ``conversations_fts``, a contentless FTS5 table (``unicode61 remove_diacritics 2``,
  as ``messages_fts``).  Its rowid must be stable, and ``conversations`` has no integer key
  (an implicit rowid may change on VACUUM), so ``conversations_fts_rowids`` gives each
  conversation a number (``num``) once.  Triggers on ``conversations`` keep both in step
  (insert, title change, delete — a cascade from a user's deletion included).  A migration
  that rebuilds ``conversations`` (Alembic's batch "recreate") drops these triggers and must
  create them again (:data:`SQLITE_TRIGGERS`).
* PostgreSQL: a GIN index on ``to_tsvector('simple', title)``, as for message content.

``ix_conversations_title`` (the index the substring scan read) goes.

Revision ID: 0011_search_index
Revises: 0010b_image_tokens
"""

from __future__ import annotations

from alembic import op

revision = "0011_search_index"
down_revision = "0010b_image_tokens"
branch_labels = None
depends_on = None

_DELETE_OLD = (
    "INSERT INTO conversations_fts(conversations_fts, rowid, title) "
    "SELECT 'delete', num, old.title FROM conversations_fts_rowids "
    "WHERE conversation_id = old.id;"
)
SQLITE_TRIGGERS = (
    "CREATE TRIGGER conversations_fts_ai AFTER INSERT ON conversations BEGIN "
    "INSERT INTO conversations_fts_rowids(conversation_id) VALUES (new.id); "
    "INSERT INTO conversations_fts(rowid, title) "
    "SELECT num, new.title FROM conversations_fts_rowids WHERE conversation_id = new.id; END",
    f"CREATE TRIGGER conversations_fts_ad AFTER DELETE ON conversations BEGIN {_DELETE_OLD} "
    "DELETE FROM conversations_fts_rowids WHERE conversation_id = old.id; END",
    "CREATE TRIGGER conversations_fts_au AFTER UPDATE OF title ON conversations "
    f"WHEN old.title IS NOT new.title BEGIN {_DELETE_OLD} "
    "INSERT INTO conversations_fts(rowid, title) "
    "SELECT num, new.title FROM conversations_fts_rowids WHERE conversation_id = new.id; END",
)
_SQLITE_CREATE = (
    "CREATE TABLE conversations_fts_rowids ("
    "num INTEGER PRIMARY KEY, conversation_id VARCHAR(32) NOT NULL UNIQUE)",
    "CREATE VIRTUAL TABLE conversations_fts USING fts5("
    "title, content='', tokenize='unicode61 remove_diacritics 2')",
    "INSERT INTO conversations_fts_rowids(conversation_id) SELECT id FROM conversations",
    "INSERT INTO conversations_fts(rowid, title) SELECT r.num, c.title "
    "FROM conversations_fts_rowids AS r JOIN conversations AS c ON c.id = r.conversation_id",
)


def upgrade() -> None:
    dialect = op.get_bind().dialect.name
    if dialect == "sqlite":
        for statement in (*_SQLITE_CREATE, *SQLITE_TRIGGERS):
            op.execute(statement)
    elif dialect == "postgresql":
        op.execute(
            "CREATE INDEX ix_conversations_title_fts ON conversations "
            "USING gin (to_tsvector('simple', title))"
        )
    op.drop_index("ix_conversations_title", table_name="conversations")


def downgrade() -> None:
    op.create_index("ix_conversations_title", "conversations", ["user_id", "title", "id"])
    dialect = op.get_bind().dialect.name
    if dialect == "sqlite":
        for name in ("conversations_fts_au", "conversations_fts_ad", "conversations_fts_ai"):
            op.execute(f"DROP TRIGGER IF EXISTS {name}")
        op.execute("DROP TABLE IF EXISTS conversations_fts")
        op.execute("DROP TABLE IF EXISTS conversations_fts_rowids")
    elif dialect == "postgresql":
        op.execute("DROP INDEX IF EXISTS ix_conversations_title_fts")
