"""The matches of a ``recall`` call (issue 17): full-text, one conversation, ranked.

The same index as conversation search (:mod:`chatmem.store.search`): SQLite's FTS5 table
``messages_fts`` (ranked by ``bm25``), PostgreSQL's GIN index on ``to_tsvector('simple',
content)`` (ranked by ``ts_rank``).  Unlike the conversation list's search, where every word
must match, a recall query is the model's own words ("what budget did we agree"): any word
may match, and the ranking puts messages holding more (and rarer) words first.  Words of
three letters or more match as a prefix ("agree" finds "agreed").

Scoped to one conversation (CTX-8) and to a :class:`~chatmem.context.recall.RecallScope`
(what the request does not carry).  The results of earlier ``recall`` calls are never
matched: they are copies of older messages, which are matched themselves.  Hidden versions
(PROJ-3: a regenerated answer, an edited question) are never matched either.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from sqlalchemy import and_, column, false, or_, select, table, text
from sqlalchemy.orm import Session

from chatmem.context.recall import RECALL_TOOL, RecallHit, RecallScope
from chatmem.store.engine import SHOWN
from chatmem.store.search import words
from chatmem.store.tables.conversations import Message
from chatmem.store.tables.runs import ToolCallRow

#: Words shorter than this match only whole.
PREFIX_FROM = 3
#: SQLite's external-content FTS5 table over ``messages.content`` (rowid = ``messages.num``).
_FTS = table("messages_fts", column("rowid"))


def _fts5_any(query: str) -> str | None:
    """``what budget`` → ``"what"* OR "budget"*`` (quoted: operators in input are inert)."""
    found = words(query)
    if not found:
        return None
    return " OR ".join(f'"{w}"*' if len(w) >= PREFIX_FROM else f'"{w}"' for w in found)


def _tsquery_any(query: str) -> str | None:
    """``what budget`` → ``what:* | budget:*`` for ``to_tsquery('simple', …)``."""
    found = [w.lower() for w in words(query)]
    if not found:
        return None
    return " | ".join(f"{w}:*" if len(w) >= PREFIX_FROM else w for w in found)


def _in_scope(conversation_id: str, scope: RecallScope) -> Any:
    """Older than ``scope.before``, or one of ``scope.also``."""
    parts: list[Any] = []
    if scope.before is not None:
        before = (
            select(Message.seq)
            .where(Message.id == scope.before, Message.conversation_id == conversation_id)
            .scalar_subquery()
        )
        parts.append(Message.seq < before)
    if scope.also:
        parts.append(Message.id.in_(sorted(scope.also)))
    return or_(*parts) if parts else false()


def _not_recall_results(conversation_id: str) -> Any:
    earlier_calls = select(ToolCallRow.call_id).where(
        ToolCallRow.conversation_id == conversation_id,
        ToolCallRow.name == RECALL_TOOL,
        ToolCallRow.server_id.is_(None),
    )
    return ~and_(Message.role == "tool", Message.tool_call_id.in_(earlier_calls))


def recall_hits(
    session: Session,
    conversation_id: str,
    query: str,
    scope: RecallScope,
    limit: int,
    *,
    exclude: Collection[str] = (),
) -> list[RecallHit]:
    """The best ``limit`` messages of the conversation in ``scope`` matching ``query``, best
    first.  ``exclude``: message ids never to return."""
    dialect = session.get_bind().dialect.name
    columns = (Message.id, Message.role, Message.created_at, Message.content)
    conditions = [
        Message.conversation_id == conversation_id,
        SHOWN,  # a hidden version (PROJ-3) is never sent, nor recalled
        _in_scope(conversation_id, scope),
        _not_recall_results(conversation_id),
    ]
    if exclude:
        conditions.append(Message.id.not_in(sorted(exclude)))
    if dialect == "sqlite":
        match = _fts5_any(query)
        if match is None:
            return []
        statement = (
            select(*columns)
            .select_from(_FTS)
            .join(Message, Message.num == _FTS.c.rowid)
            .where(text("messages_fts MATCH :recall_query"))
            .where(*conditions)
            .order_by(text("bm25(messages_fts)"), Message.seq)
        )
        parameters = {"recall_query": match}
    else:
        ts = _tsquery_any(query)
        if ts is None:
            return []
        tsquery = "to_tsquery('simple', :recall_query)"
        statement = (
            select(*columns)
            .where(text(f"to_tsvector('simple', messages.content) @@ {tsquery}"))
            .where(*conditions)
            .order_by(
                text(f"ts_rank(to_tsvector('simple', messages.content), {tsquery}) DESC"),
                Message.seq,
            )
        )
        parameters = {"recall_query": ts}
    rows = session.execute(statement.limit(limit), parameters).all()
    return [
        RecallHit(
            message_id=row.id,
            role=row.role,
            created_at=row.created_at.strftime("%Y-%m-%d %H:%M UTC"),
            content=row.content,
        )
        for row in rows
    ]
