"""Token counts computed once at write time, for every tokenizer (CTX-1, CTX-2).

A message is counted when it is stored, and the counts are kept in ``tokens_<name>`` columns,
so planning never re-tokenizes history whatever tokenizer the conversation's current profile
uses (a conversation can switch models, STORE-2).  The estimate and every exact tokenizer
some profile names (:func:`tokenizers_in_use`) are counted at write time; an exact count no
profile needed yet is stored as :data:`UNCOUNTED` and counted once, the first time a plan
needs it (:func:`fill_uncounted`, called by the engine loader; a partial index finds such
rows at no cost when there are none), then kept (issue 16: an import counted every message
with all three tokenizers though a profile uses one — 6 MB/s).

When the conservative estimate itself changes (issue 11 made it count every digit), the
cached ``tokens_estimate`` of existing rows is stale: a data migration calls
:func:`recount_estimates` (revision 0007), and an archive restore recounts the estimate of
the messages it brings back rather than trusting the archived one.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Collection
from typing import TYPE_CHECKING, Any, cast

from sqlalchemy import Connection, bindparam, select, text, update
from sqlalchemy.orm import Session

from chatmem.context import tokens as engine_tokens
from chatmem.context.values import Message, ToolCall
from chatmem.store.tables.conversations import TOKEN_COLUMNS
from chatmem.store.tables.conversations import Message as MessageRow
from chatmem.store.tables.profiles import ModelProfile

if TYPE_CHECKING:  # db imports this module
    from chatmem.store.db import Database

#: A cached exact count not computed yet (no profile used its tokenizer at write time).
UNCOUNTED = -1
# The partial indexes on the rows still to count (migration 0011b_lazy_counts): the loader's
# check must spell the condition exactly as the index does, literal included.
UNCOUNTED_CONDITION = {column: f"{column} < 0" for column in TOKEN_COLUMNS.values()}


def counts_for_message(message: Message, names: Collection[str] | None = None) -> dict[str, int]:
    """``{"tokens_estimate": …, "tokens_o200k": …, "tokens_cl100k": …}`` for one message:
    the estimate and the tokenizers in ``names`` (every one when ``None``) counted, the
    others :data:`UNCOUNTED`."""
    return {
        column: engine_tokens.count_message(message, engine_tokens.get_tokenizer(name))
        if names is None or name == "estimate" or name in names
        else UNCOUNTED
        for name, column in TOKEN_COLUMNS.items()
    }


#: How long :func:`tokenizers_in_use` trusts its last answer.  A stale answer costs nothing
#: but a later count: a tokenizer a new profile uses is counted when first planned.
IN_USE_SECONDS = 5.0
#: Where a database's connections carry its :class:`TokenizersInUse` (``Connection.info``).
IN_USE_KEY = "chatmem.tokenizers_in_use"


class TokenizersInUse:
    """The tokenizers to count at write time for one database: the estimate and each one a
    profile names, read at most every :data:`IN_USE_SECONDS` (every stored message asks).
    ``Database`` owns one and hands it to each of its connections (:data:`IN_USE_KEY`)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        #: Injectable (a test's clock).
        self.clock = clock
        self._answer: tuple[float, frozenset[str]] | None = None

    def __call__(self, connection: Connection) -> frozenset[str]:
        now = self.clock()
        if self._answer is not None and now - self._answer[0] < IN_USE_SECONDS:
            return self._answer[1]
        found = read_tokenizers_in_use(connection)
        self._answer = (now, found)
        return found


def read_tokenizers_in_use(db: Session | Connection) -> frozenset[str]:
    named = db.execute(select(ModelProfile.tokenizer).distinct()).scalars()
    return frozenset({"estimate", *(name for name in named if name in TOKEN_COLUMNS)})


def tokenizers_in_use(db: Session | Connection) -> frozenset[str]:
    """The tokenizers to count at write time (the database's :class:`TokenizersInUse`; read
    afresh on a connection of no ``Database``, as a migration's)."""
    connection = db.connection() if isinstance(db, Session) else db
    owner = connection.info.get(IN_USE_KEY)
    if owner is None:
        return read_tokenizers_in_use(connection)
    return cast(frozenset[str], owner(connection))


def warm_tokenizers(db: Database) -> None:
    """Loads the encoding of every tokenizer a profile uses once (they are process-wide and
    cached); one a profile takes up later loads on its first count."""
    with contextlib.suppress(Exception):  # a database not there yet: nothing to warm
        with db.engine.connect() as connection:
            names = tokenizers_in_use(connection)
        for name in names:
            with contextlib.suppress(Exception):  # a broken encoding fails where it is used
                engine_tokens.get_tokenizer(name).count("warm up")


def fill_uncounted(connection: Connection, conversation_id: str, column: str) -> int:
    """Count the conversation's messages whose ``column`` is :data:`UNCOUNTED` and store the
    counts (once: the next plan reads them); returns how many.  Free when there are none:
    the partial index holds only such rows."""
    if column == TOKEN_COLUMNS["estimate"] or column not in UNCOUNTED_CONDITION:
        return 0
    table: Any = MessageRow.__table__
    rows = connection.execute(
        select(table.c.num, table.c.role, table.c.content, table.c.tool_calls, table.c.tool_call_id)
        .where(table.c.conversation_id == conversation_id)
        .where(text(UNCOUNTED_CONDITION[column]))
    ).all()
    if not rows:
        return 0
    name = next(n for n, c in TOKEN_COLUMNS.items() if c == column)
    tokenizer = engine_tokens.get_tokenizer(name)
    connection.execute(
        update(table).where(table.c.num == bindparam("k")).values({column: bindparam("t")}),
        [{"k": row.num, "t": engine_tokens.count_message(_stored(row), tokenizer)} for row in rows],
    )
    return len(rows)


def _stored(row: Any) -> Message:
    """A stored message row (``num``, ``role``, ``content``, ``tool_calls``,
    ``tool_call_id``) as the engine counts it."""
    return Message(
        id=str(row.num),
        role=row.role,
        content=row.content or "",
        tool_calls=tuple(
            ToolCall(str(c.get("id", "")), str(c.get("name", "")), c.get("arguments", ""))
            for c in row.tool_calls or ()
            if isinstance(c, dict)
        ),
        tool_call_id=row.tool_call_id,
    )


def with_fresh_estimate(kept: dict[str, int], message: Message) -> dict[str, int]:
    """Counts kept with an archived message, the estimate counted again: the exact encodings
    never change, the estimate may have since the archive was written (it is fast)."""
    estimate = engine_tokens.get_tokenizer("estimate")
    return {**kept, TOKEN_COLUMNS["estimate"]: engine_tokens.count_message(message, estimate)}


def counts_for_text(text: str) -> dict[str, int]:
    """Counts for free text (file contents, summaries): no per-message overhead."""
    return {
        column: engine_tokens.get_tokenizer(name).count(text)
        for name, column in TOKEN_COLUMNS.items()
    }


def column_for(tokenizer: str) -> str:
    """The cached-count column for a profile's tokenizer (unknown names use the estimate)."""
    return TOKEN_COLUMNS.get(tokenizer, TOKEN_COLUMNS["estimate"])


#: Rows recounted per statement by :func:`recount_estimates`.
RECOUNT_BATCH = 2_000


def recount_estimates(connection: Any, batch: int = RECOUNT_BATCH) -> dict[str, int]:
    """Count ``tokens_estimate`` again for every message, summary and file (CTX-2's cached
    counts) after the estimate itself changed; a data migration calls it (0007).  Only the
    estimate is recounted (the exact encodings never change), in keyset batches, and only
    rows whose count changed are written.  Returns the number of rows rewritten by table."""
    import sqlalchemy as sa

    estimate = engine_tokens.get_tokenizer("estimate")
    changed = {"messages": 0, "summaries": 0, "files": 0}

    messages = sa.table(
        "messages",
        sa.column("num", sa.Integer),
        sa.column("id", sa.String),
        sa.column("role", sa.String),
        sa.column("content", sa.Text),
        sa.column("tool_calls", sa.JSON),
        sa.column("tool_call_id", sa.String),
        sa.column("tokens_estimate", sa.Integer),
    )
    last = None
    while True:
        query = sa.select(messages).order_by(messages.c.num).limit(batch)
        if last is not None:
            query = query.where(messages.c.num > last)
        rows = connection.execute(query).all()
        if not rows:
            break
        last = rows[-1].num
        updates = []
        for row in rows:
            tokens = engine_tokens.count_message(_stored(row), estimate)
            if tokens != row.tokens_estimate:
                updates.append({"k": row.num, "t": tokens})
        if updates:
            connection.execute(
                sa.update(messages)
                .where(messages.c.num == sa.bindparam("k"))
                .values(tokens_estimate=sa.bindparam("t")),
                updates,
            )
            changed["messages"] += len(updates)

    for name, text_column in (("summaries", "text"), ("files", "content")):
        table = sa.table(
            name,
            sa.column("id", sa.String),
            sa.column(text_column, sa.Text),
            sa.column("tokens_estimate", sa.Integer),
        )
        last_id = None
        while True:
            query = sa.select(table).order_by(table.c.id).limit(batch)
            if last_id is not None:
                query = query.where(table.c.id > last_id)
            rows = connection.execute(query).all()
            if not rows:
                break
            last_id = rows[-1].id
            updates = [
                {"k": row.id, "t": tokens}
                for row in rows
                if (tokens := estimate.count(getattr(row, text_column) or ""))
                != row.tokens_estimate
            ]
            if updates:
                connection.execute(
                    sa.update(table)
                    .where(table.c.id == sa.bindparam("k"))
                    .values(tokens_estimate=sa.bindparam("t")),
                    updates,
                )
                changed[name] += len(updates)
    return changed
