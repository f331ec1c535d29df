"""Full-text search over titles and message content (STORE-7), one query per dialect.

Both sides are indexes: SQLite's FTS5 tables ``messages_fts`` (rowid = ``messages.num``) and
``conversations_fts`` (rowid = ``conversations_fts_rowids.num``, migration
0011_search_index); PostgreSQL's GIN indexes on ``to_tsvector('simple', content)`` and
``to_tsvector('simple', title)``.  A query is reduced to its words and every word must
match, the last one as a prefix (search-as-you-type), in a title or in one message.

The conversation search starts from the indexes: the matching conversation ids (title hits
and message hits, a union) come first, and only those conversations are then read, filtered
(the user's, not archived) and ordered — never a walk over the user's whole list testing
each one, and no ``title LIKE '%q%'`` scan.  Its cost is the index lookups plus one primary
key read per matching conversation (``bench/search.py`` measures both side by side).

:func:`search_messages` is the same index scoped to one conversation: its messages holding
every word, best match first.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from sqlalchemy import (
    ColumnElement,
    CompoundSelect,
    Select,
    column,
    false,
    literal_column,
    select,
    table,
    text,
    union,
)
from sqlalchemy.orm import Session

from chatmem.store.tables.conversations import Conversation, Message

_WORD = re.compile(r"\w+", re.UNICODE)
#: SQLite's external-content FTS5 table over ``messages.content`` (rowid = ``messages.num``).
_MESSAGES_FTS = table("messages_fts", column("rowid"))
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


def _sqlite_hits(match: str) -> CompoundSelect:
    # A message hit's conversation comes from the covering index ix_messages_num_conversation
    # (SQLite would otherwise read each hit's whole, large row by rowid); SQLAlchemy renders
    # no SQLite table hints, hence the textual FROM.
    content: Select[Any] = (
        select(literal_column("m.conversation_id").label("id"))
        .select_from(
            text(
                "messages_fts JOIN messages AS m INDEXED BY ix_messages_num_conversation "
                "ON m.num = messages_fts.rowid"
            )
        )
        .where(text("messages_fts MATCH :fts_content").bindparams(fts_content=match))
    )
    title: Select[Any] = (
        select(literal_column("r.conversation_id").label("id"))
        .select_from(
            text(
                "conversations_fts JOIN conversations_fts_rowids AS r "
                "ON r.num = conversations_fts.rowid"
            )
        )
        .where(text("conversations_fts MATCH :fts_title").bindparams(fts_title=match))
    )
    return union(title, content)


def _postgres_hits(ts: str) -> CompoundSelect:
    content = select(Message.conversation_id.label("id")).where(
        text(
            "to_tsvector('simple', messages.content) @@ to_tsquery('simple', :ts_content)"
        ).bindparams(ts_content=ts)
    )
    title = select(Conversation.id.label("id")).where(
        text(
            "to_tsvector('simple', conversations.title) @@ to_tsquery('simple', :ts_title)"
        ).bindparams(ts_title=ts)
    )
    return union(title, content)


def matching_ids(session: Session, query: str) -> CompoundSelect | None:
    """The ids of the conversations (any user's) whose title or one of whose messages holds
    every word of ``query``, straight from the indexes; ``None`` when it has no word."""
    if session.get_bind().dialect.name == "sqlite":
        match = fts5_query(query)
        return None if match is None else _sqlite_hits(match)
    ts = tsquery(query)
    return None if ts is None else _postgres_hits(ts)


def search_condition(session: Session, user_id: str, query: str) -> ColumnElement[bool]:
    """A condition on ``Conversation`` for the list: its id is one of :func:`matching_ids`.

    The list's own filters are written so the planner cannot walk ix_conversations_list
    with them (``+user_id``: SQLite uses no index for an expression) and so drives the query
    from the id set, one primary-key read per hit; PostgreSQL plans that way by itself."""
    hits = matching_ids(session, query)
    if hits is None:
        return false()  # no word: nothing matches
    if session.get_bind().dialect.name == "sqlite":
        return Conversation.id.in_(hits) & text("+conversations.user_id = :search_user").bindparams(
            search_user=user_id
        )
    return Conversation.id.in_(hits)


def search_messages(
    session: Session, conversation_id: str, query: str, limit: int = 20
) -> Sequence[Message]:
    """The messages of one conversation holding every word of ``query`` (the last as a
    prefix), best match first (SQLite ``bm25``, PostgreSQL ``ts_rank``), newest first among
    equals; at most ``limit``.  Empty when the query has no word."""
    if session.get_bind().dialect.name == "sqlite":
        match = fts5_query(query)
        if match is None:
            return []
        stmt = (
            select(Message)
            .join(_MESSAGES_FTS, _MESSAGES_FTS.c.rowid == Message.num)
            .where(
                Message.conversation_id == conversation_id,
                text("messages_fts MATCH :fts_query").bindparams(fts_query=match),
            )
            .order_by(text("bm25(messages_fts)"), Message.seq.desc())
        )
    else:
        ts = tsquery(query)
        if ts is None:
            return []
        vector = "to_tsvector('simple', messages.content)"
        stmt = (
            select(Message)
            .where(
                Message.conversation_id == conversation_id,
                text(f"{vector} @@ to_tsquery('simple', :ts_query)").bindparams(ts_query=ts),
            )
            .order_by(
                text(f"ts_rank({vector}, to_tsquery('simple', :ts_rank_query)) DESC").bindparams(
                    ts_rank_query=ts
                ),
                Message.seq.desc(),
            )
        )
    return list(session.scalars(stmt.limit(limit)))
