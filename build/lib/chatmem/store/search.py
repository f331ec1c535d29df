"""Full-text search over titles and message content (STORE-7), one query per dialect.

Both sides are indexes: SQLite's FTS5 tables ``messages_fts`` (rowid = ``messages.num``) and
``conversations_fts`` (rowid = ``conversations_fts_rowids.num``, migration
0011_search_index); PostgreSQL's GIN indexes on ``to_tsvector('simple', content)`` and
``to_tsvector('simple', title)``.  A query is reduced to its words and every word must
match, the last one as a prefix (search-as-you-type), in a title or in one message.

The conversation search starts from the indexes: the matching conversation ids (title hits
and message hits, a union) come first and only those conversations are then read, filtered
(the user's, not archived, the folder, the page) and ordered (:func:`search_source`) —
on SQLite the ids are read first (:func:`matching_ids`; none, and the answer is an empty page
at once), on PostgreSQL all of it is one statement.  Never a walk over the user's whole list
testing each one, and no ``title LIKE '%q%'`` scan.  Its cost is the index lookups plus one
primary-key read per matching conversation (``bench/search.py`` measures both side by side).

Imports write messages in batches (:func:`insert_messages`): on SQLite the full-text index
gets a batch in one statement rather than a trigger call per row.

:func:`search_messages` is the same index scoped to one conversation: its messages holding
every word, best match first.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import fields as dataclass_fields
from operator import itemgetter
from typing import TYPE_CHECKING, Any

from sqlalchemy import (
    ColumnElement,
    Connection,
    Select,
    String,
    bindparam,
    column,
    func,
    insert,
    select,
    table,
    text,
    true,
)
from sqlalchemy.orm import Session, aliased

from chatmem.store.tables.conversations import Conversation, Message

if TYPE_CHECKING:  # messages imports conversations, which imports this module
    from chatmem.store.messages import MessageRecord

_WORD = re.compile(r"\w+", re.UNICODE)
#: SQLite's external-content FTS5 table over ``messages.content`` (rowid = ``messages.num``).
_MESSAGES_FTS = table("messages_fts", column("rowid"))
MAX_WORDS = 16


#: SQLite's trigger that indexes each inserted message (migration 0001_core).
_INDEXING_TRIGGER = "messages_fts_ai"
#: Fewer rows than this go through the trigger (the bulk path changes the schema twice).
BULK_INDEX_ROWS = 200
#: SQLite's largest rowid: past it new rowids are random and "the rows after ``num``" would
#: not name the new rows.
_MAX_ROWID = 2**63 - 1


def insert_messages(connection: Connection, rows: Sequence[dict[str, Any]]) -> None:
    """Inserts message rows (one ``executemany``) into the full-text index too.

    PostgreSQL's GIN index follows by itself.  On SQLite the trigger ``messages_fts_ai``
    indexes one row at a time, which costs twice what storing the row does (issue 16: half of
    an import's writing); for a batch it is dropped, the rows inserted, the index filled with
    one ``INSERT … SELECT`` of exactly the new rows (``num`` above the largest before: an
    ``INTEGER PRIMARY KEY`` numbers new rows after it) and the trigger created again from
    its own stored text — all inside the caller's transaction (SQLite's schema changes are
    transactional, and the write lock keeps every other writer out meanwhile), so no other
    connection ever sees the table without its trigger or the index without the rows."""
    if not rows:
        return
    if connection.dialect.name != "sqlite":
        connection.execute(insert(Message), list(rows))
        return
    trigger = None
    if len(rows) >= BULK_INDEX_ROWS:
        trigger = connection.exec_driver_sql(
            "SELECT sql FROM sqlite_master WHERE type = 'trigger' AND name = ?",
            (_INDEXING_TRIGGER,),
        ).scalar()
    before = connection.exec_driver_sql("SELECT coalesce(max(num), 0) FROM messages").scalar_one()
    if trigger is None or before > _MAX_ROWID - len(rows):
        _sqlite_insert(connection, rows)
        return
    connection.exec_driver_sql(f"DROP TRIGGER {_INDEXING_TRIGGER}")
    _sqlite_insert(connection, rows)
    connection.exec_driver_sql(
        "INSERT INTO messages_fts(rowid, content) SELECT num, content FROM messages WHERE num > ?",
        (before,),
    )
    connection.exec_driver_sql(trigger)


def _sqlite_insert(connection: Connection, rows: Sequence[dict[str, Any]]) -> None:
    """SQLite: the rows in one driver ``executemany`` of a plain ``INSERT``, each value through
    its column type's bind processor (what SQLAlchemy's executemany does, at half its cost per
    row: issue 16).  Rows must give every column but ``num`` (no default is filled in here);
    others go through SQLAlchemy."""
    columns = Message.__table__.c
    keys = list(rows[0])
    if set(keys) != {c.name for c in columns if c.name != "num"}:
        connection.execute(insert(Message), list(rows))
        return
    processors = [columns[key].type.bind_processor(connection.dialect) for key in keys]
    quote = connection.dialect.identifier_preparer.quote
    statement = (
        f"INSERT INTO messages ({', '.join(quote(key) for key in keys)}) "
        f"VALUES ({', '.join('?' * len(keys))})"
    )
    # Column by column (the processors mapped over each column, the rows zipped back).
    by_column = zip(*map(itemgetter(*keys), rows), strict=True)
    processed = [
        values if process is None else list(map(process, values))
        for process, values in zip(processors, by_column, strict=True)
    ]
    connection.exec_driver_sql(statement, list(zip(*processed, strict=True)))


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


# The conversation ids a query matches, title hits and message hits, straight from the
# indexes (any user's: the list filters them).  SQLite: a message hit's conversation comes
# from the covering index ix_messages_num_conversation (it would otherwise read each hit's
# whole, large row by rowid).
_SQLITE_IDS = text(
    "SELECT r.conversation_id FROM conversations_fts "
    "JOIN conversations_fts_rowids AS r ON r.num = conversations_fts.rowid "
    "WHERE conversations_fts MATCH :q "
    "UNION SELECT m.conversation_id FROM messages_fts "
    "JOIN messages AS m INDEXED BY ix_messages_num_conversation ON m.num = messages_fts.rowid "
    "WHERE messages_fts MATCH :q"
)
_POSTGRES_IDS = text(
    "SELECT id FROM conversations "
    "WHERE to_tsvector('simple', title) @@ to_tsquery('simple', :q) "
    "UNION SELECT conversation_id FROM messages "
    "WHERE to_tsvector('simple', content) @@ to_tsquery('simple', :q)"
)


def matching_ids(session: Session, query: str) -> list[str]:
    """The ids of the conversations (any user's) whose title or one of whose messages holds
    every word of ``query``, straight from the indexes; none when it has no word."""
    if session.get_bind().dialect.name == "sqlite":
        match, statement = fts5_query(query), _SQLITE_IDS
    else:
        match, statement = tsquery(query), _POSTGRES_IDS
    if match is None:
        return []
    return list(session.scalars(statement, {"q": match}))


def search_source(
    dialect: str, conditions: Sequence[ColumnElement[bool]]
) -> tuple[Any, Select[Any]]:
    """The conversation list's source for a search: ``(entity, select(entity))`` — the
    conversations meeting ``conditions`` (written on ``Conversation``: the user's, not
    archived, the folder, the page cursor) whose title or a message holds every word of the
    query — for the caller to order and page by ``entity``'s columns.  Built once per shape
    (constructing it costs SQLAlchemy more than PostgreSQL takes to run it); the query comes
    as values (:func:`search_values`).

    SQLite: the ids the indexes return (:func:`matching_ids`, read first) go back as one
    value, a JSON array, so the query is driven from them, one primary-key read each, and
    not from the list index or a scan of the table: the list's ``user_id`` filter is
    repeated as an expression (``+user_id``) the planner cannot walk an index with.

    PostgreSQL: one statement that starts from the indexes — the hits
    (:data:`_POSTGRES_IDS`: the title's and the messages' GIN indexes, their union) — and
    reads each hit's conversation by primary key in a ``LATERAL`` subquery, filtered there,
    then orders the page.  The subquery's ``LIMIT 1`` (an id names one row) keeps the
    planner from flattening it into a hash join fed by a sequential scan of every
    conversation, which it prefers on its estimates and which costs several times the index
    lookup (issue 16: the ids sent back as an array were 3.7-4.0x the raw index query)."""
    if dialect == "sqlite":
        listed: Select[Any] = select(column("value")).select_from(
            func.json_each(bindparam("search_ids", type_=String()))
        )
        condition = Conversation.id.in_(listed) & text(
            "+conversations.user_id = conversations.user_id"
        )
        return Conversation, select(Conversation).where(*conditions, condition)
    hits = _POSTGRES_IDS.columns(column("id", String)).subquery("hits")
    row = (
        select(Conversation)
        .where(Conversation.id == hits.c.id, *conditions)
        .limit(1)
        .lateral("conversation")
    )
    entity = aliased(Conversation, row)
    return entity, select(entity).select_from(hits).join(row, true())


def search_values(session: Session, query: str) -> dict[str, Any] | None:
    """The values :func:`search_source`'s statement takes for ``query``, or ``None`` when
    nothing can match (no word; on SQLite, no hit in the indexes) and the list is answered
    without another statement."""
    if session.get_bind().dialect.name == "sqlite":
        ids = matching_ids(session, query)
        return {"search_ids": json.dumps(ids)} if ids else None
    match = tsquery(query)
    return {"q": match} if match is not None else None


def search_messages(
    session: Session, conversation_id: str, query: str, limit: int = 20
) -> list[MessageRecord]:
    """The messages of one conversation holding every word of ``query`` (the last as a
    prefix), best match first (SQLite ``bm25``, PostgreSQL ``ts_rank``), newest first among
    equals; at most ``limit``.  Empty when the query has no word."""
    from chatmem.store.messages import MessageRecord  # see TYPE_CHECKING above

    # The record's columns, read as they are (no ORM object is built).
    record_columns = [getattr(Message, field.name) for field in dataclass_fields(MessageRecord)]
    if session.get_bind().dialect.name == "sqlite":
        match = fts5_query(query)
        if match is None:
            return []
        stmt = (
            select(*record_columns)
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
            select(*record_columns)
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
    return [MessageRecord(*row) for row in session.execute(stmt.limit(limit))]
