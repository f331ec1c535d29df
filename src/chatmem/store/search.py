"""Full-text search over titles and message content (STORE-7), one query per dialect.

SQLite uses the FTS5 index ``messages_fts`` (rowid = ``messages.num``); PostgreSQL the GIN
index on ``to_tsvector('simple', content)``.  A query is reduced to its words and every word
must match, the last one as a prefix (search-as-you-type).  Titles match as a
case-insensitive substring.  The result is a WHERE clause for the conversation list, so
search shares its paging, ordering and ownership scoping.
"""

from __future__ import annotations

import re
from typing import Any

from sqlalchemy import ColumnElement, Select, literal_column, select, text, union
from sqlalchemy.orm import Session, aliased

from chatmem.store.tables.conversations import Conversation, Message

_WORD = re.compile(r"\w+", re.UNICODE)
MAX_WORDS = 16


def words(query: str) -> list[str]:
    return _WORD.findall(query)[:MAX_WORDS]


def fts5_query(query: str) -> str | None:
    """``foo bar`` → ``"foo" AND "bar"*`` (quoted, so FTS5 operators in input are inert)."""
    found = words(query)
    if not found:
        return None
    quoted = [f'"{w}"' for w in found]
    quoted[-1] += "*"
    return " AND ".join(quoted)


def tsquery(query: str) -> str | None:
    """``foo bar`` → ``foo & bar:*`` for ``to_tsquery('simple', …)``."""
    found = [w.lower() for w in words(query)]
    if not found:
        return None
    found[-1] += ":*"
    return " & ".join(found)


def _like_pattern(query: str) -> str:
    escaped = query.strip().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def matching_conversation_ids(session: Session, user_id: str, query: str) -> ColumnElement[bool]:
    """A condition on ``Conversation``: the title contains ``query`` or a message matches it.

    Both branches are id sets computed once (the title set from ``ix_conversations_title``,
    the content set from the full-text index) and tested while walking the list index."""
    dialect = session.get_bind().dialect.name
    titled = aliased(Conversation)
    like = titled.title.like if dialect == "sqlite" else titled.title.ilike
    # SQLite's LIKE already ignores ASCII case; lower() would add nothing but cost.
    by_title = select(titled.id).where(
        titled.user_id == user_id, like(_like_pattern(query), escape="\\")
    )
    if dialect == "sqlite":
        match = fts5_query(query)
        if match is None:
            return Conversation.id.in_(by_title)
        # SQLite would read each hit's whole (large) row by rowid; the covering index
        # ix_messages_num_conversation is far denser.  SQLAlchemy renders no SQLite table
        # hints, hence the textual FROM.
        hits: Select[Any] = (
            select(literal_column("m.conversation_id"))
            .select_from(
                text(
                    "messages_fts JOIN messages AS m INDEXED BY ix_messages_num_conversation "
                    "ON m.num = messages_fts.rowid"
                )
            )
            .where(text("messages_fts MATCH :fts_query").bindparams(fts_query=match))
        )
    else:
        ts = tsquery(query)
        if ts is None:
            return Conversation.id.in_(by_title)
        hits = select(Message.conversation_id).where(
            text(
                "to_tsvector('simple', messages.content) @@ to_tsquery('simple', :ts_query)"
            ).bindparams(ts_query=ts)
        )
    return Conversation.id.in_(union(by_title, hits))
