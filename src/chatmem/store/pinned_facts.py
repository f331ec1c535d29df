"""Pinned facts as stored (CTX-24): what the user asked the model to always remember.

Rules:

* Only the owner of a live (not archived) conversation reads or changes its facts; a fact of
  another conversation, or anyone else's, is :class:`~chatmem.errors.NotFound` (STORE-1).
* A fact is text of at most :data:`MAX_FACT_CHARS` characters, not blank (surrounding
  blanks are trimmed: what is sent is what is shown); a conversation keeps at most
  :data:`MAX_FACTS` — both :class:`~chatmem.errors.InvalidInput`.  Together they may take at
  most :data:`MAX_FACTS_TOKENS` tokens of a request under any tokenizer
  (:class:`~chatmem.errors.TooLarge`); a refused change stores nothing.
* ``message_id``, when given, names a message of the same conversation (the one the fact
  was selected from, or the kept fact's); it stays when that message is later deleted.
* Every change renders the one message the facts are sent as
  (:func:`chatmem.context.pinned_facts.render_pinned_facts`) and counts it for every
  tokenizer, the per-message overhead included (CTX-2: planning reads the cached count), and
  touches the conversation (``updated_at``, which keys its cached plan) and sets its
  ``has_pinned_facts`` flag, which a turn reads with the conversation's row.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import delete, select, update
from sqlalchemy.orm import Session

from chatmem.context.pinned_facts import MAX_FACT_CHARS, MAX_FACTS, render_pinned_facts
from chatmem.context.tokens import MESSAGE_OVERHEAD
from chatmem.errors import InvalidInput, NotFound, TooLarge
from chatmem.store.conversations import owned_conversation_row
from chatmem.store.tables.conversations import Conversation, Message
from chatmem.store.tables.pinned_facts import PinnedFactBlockRow, PinnedFactRow
from chatmem.store.token_counts import counts_for_text
from chatmem.store.types import utcnow

__all__ = [
    "MAX_FACTS",
    "MAX_FACTS_TOKENS",
    "MAX_FACT_CHARS",
    "PinnedFact",
    "add_fact",
    "checked_fact",
    "delete_fact",
    "edit_fact",
    "fact_block",
    "list_facts",
]

#: The most tokens the facts together may take in every request (as an app's context).
MAX_FACTS_TOKENS = 4_000


@dataclass(frozen=True, slots=True)
class PinnedFact:
    id: str
    conversation_id: str
    text: str
    message_id: str | None
    created_at: datetime
    updated_at: datetime


def _record(row: PinnedFactRow) -> PinnedFact:
    return PinnedFact(
        id=row.id,
        conversation_id=row.conversation_id,
        text=row.text,
        message_id=row.message_id,
        created_at=row.created_at,
        updated_at=row.updated_at,
    )


def checked_fact(text: str) -> str:
    """The fact as it is kept (trimmed), or InvalidInput naming what is wrong."""
    text = text.strip()
    if not text:
        raise InvalidInput("text: write the fact to remember; it cannot be empty.")
    if len(text) > MAX_FACT_CHARS:
        raise InvalidInput(
            f"text: a pinned fact is at most {MAX_FACT_CHARS:,} characters "
            f"(this one is {len(text):,}); attach longer text as a pinned file."
        )
    return text


def _owned_locked(session: Session, user_id: str, conversation_id: str) -> None:
    """The owner's live conversation, its row locked for this change (PostgreSQL: two
    changes at once are one after the other, so the bounds and the one cached message hold;
    SQLite writes one at a time anyway)."""
    owned_conversation_row(session, user_id, conversation_id)
    session.execute(
        select(Conversation.id).where(Conversation.id == conversation_id).with_for_update()
    )


def _rows(session: Session, conversation_id: str) -> list[PinnedFactRow]:
    return list(
        session.scalars(
            select(PinnedFactRow)
            .where(PinnedFactRow.conversation_id == conversation_id)
            .order_by(PinnedFactRow.created_at, PinnedFactRow.id)
        )
    )


def list_facts(session: Session, user_id: str, conversation_id: str) -> list[PinnedFact]:
    """The conversation's pinned facts, oldest first (as they are sent)."""
    owned_conversation_row(session, user_id, conversation_id)
    return [_record(row) for row in _rows(session, conversation_id)]


def add_fact(
    session: Session,
    user_id: str,
    conversation_id: str,
    text: str,
    message_id: str | None = None,
) -> PinnedFact:
    """Pins ``text`` to the conversation (after its other facts)."""
    _owned_locked(session, user_id, conversation_id)
    text = checked_fact(text)
    if message_id is not None:
        found = session.scalar(
            select(Message.id).where(
                Message.id == message_id, Message.conversation_id == conversation_id
            )
        )
        if found is None:
            raise NotFound("message")
    rows = _rows(session, conversation_id)
    if len(rows) >= MAX_FACTS:
        raise InvalidInput(
            f"A conversation keeps at most {MAX_FACTS} pinned facts; "
            "delete or merge one before pinning another."
        )
    now = utcnow()
    # After the newest: two facts pinned within the clock's resolution keep their order.
    newest = max((r.created_at for r in rows), default=None)
    created = now if newest is None or now > newest else newest
    row = PinnedFactRow(
        conversation_id=conversation_id,
        text=text,
        message_id=message_id,
        created_at=created,
        updated_at=now,
    )
    _refresh(session, conversation_id, [*(r.text for r in rows), text])
    session.add(row)
    session.flush()
    return _record(row)


def edit_fact(
    session: Session, user_id: str, conversation_id: str, fact_id: str, text: str
) -> PinnedFact:
    """The fact with the user's new text (its place and origin stay)."""
    _owned_locked(session, user_id, conversation_id)
    text = checked_fact(text)
    rows = _rows(session, conversation_id)
    row = next((r for r in rows if r.id == fact_id), None)
    if row is None:
        raise NotFound("fact")
    _refresh(session, conversation_id, [text if r is row else r.text for r in rows])
    row.text, row.updated_at = text, utcnow()
    session.flush()
    return _record(row)


def delete_fact(session: Session, user_id: str, conversation_id: str, fact_id: str) -> None:
    """Unpins the fact: the next request is sent without it."""
    _owned_locked(session, user_id, conversation_id)
    rows = _rows(session, conversation_id)
    row = next((r for r in rows if r.id == fact_id), None)
    if row is None:
        raise NotFound("fact")
    session.delete(row)
    _refresh(session, conversation_id, [r.text for r in rows if r is not row])


def fact_block(texts: list[str]) -> tuple[str, dict[str, int]]:
    """The one message ``texts`` are sent as and its counts for every tokenizer (overhead
    included), or TooLarge past :data:`MAX_FACTS_TOKENS` under any of them."""
    block = render_pinned_facts(texts)
    counts = {column: MESSAGE_OVERHEAD + n for column, n in counts_for_text(block).items()}
    tokens = max(counts.values())
    if tokens > MAX_FACTS_TOKENS:
        raise TooLarge(
            tokens,
            MAX_FACTS_TOKENS,
            message=(
                f"The pinned facts would take {tokens:,} tokens of every request; together "
                f"they may take at most {MAX_FACTS_TOKENS:,}. Nothing was changed: shorten "
                "or delete a fact first."
            ),
        )
    return block, counts


def _refresh(session: Session, conversation_id: str, texts: list[str]) -> None:
    """The facts' message rendered and counted anew (or gone with the last fact), the
    conversation touched and flagged.  Checks the token bound first: a refusal changes
    nothing."""
    if not texts:
        session.execute(
            delete(PinnedFactBlockRow).where(PinnedFactBlockRow.conversation_id == conversation_id)
        )
        _flag(session, conversation_id, False)
        return
    block, counts = fact_block(texts)
    row = session.get(PinnedFactBlockRow, conversation_id)
    if row is None:
        row = PinnedFactBlockRow(conversation_id=conversation_id)
        session.add(row)
    row.text = block
    for column, n in counts.items():
        setattr(row, column, n)
    _flag(session, conversation_id, True)


def _flag(session: Session, conversation_id: str, present: bool) -> None:
    session.execute(
        update(Conversation)
        .where(Conversation.id == conversation_id)
        .values(has_pinned_facts=present, updated_at=utcnow())
    )
