"""Reading and editing the current summary, and continuing from it in a new conversation
(CTX-23, with CTX-9's storage rules).

Summaries are never overwritten (STORE-2): an edit is a new version that covers exactly the
messages the previous one covered (same first and last message, same count), with the
user's text and its token counts; its ``model`` column says ``edited-by-user`` so the edit
stays visible without a column of its own, and its cost is 0.  History is not touched.

"Continue in a new chat" creates a conversation owned by the same user, with the source's
profile, mode, instructions and folder, linked back through ``source_conversation_id``, and
no messages: its summary version 1 carries the source's current text and covers none of its
messages (``through_message_id`` NULL, ``message_count`` 0).  Ownership is checked by the
caller's lookups (:func:`chatmem.store.conversations.owned_conversation`, STORE-1).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from chatmem.context.facts import contains, normalise
from chatmem.errors import InvalidInput, NothingToCompress
from chatmem.store.accounts import Account
from chatmem.store.conversations import ConversationRecord, create_conversation
from chatmem.store.fact_records import EMPTY, FactRecord, read_record
from chatmem.store.quotas import Limits
from chatmem.store.tables.conversations import TOKEN_COLUMNS, Summary
from chatmem.store.token_counts import counts_for_text
from chatmem.store.types import utcnow

#: The ``model`` of a version written by the user (CTX-23): an honest marker, no new column.
EDITED_BY_USER = "edited-by-user"
MAX_SUMMARY_CHARS = 200_000
CONTINUED_SUFFIX = " (continued)"
CONTINUED_UNTITLED = "Continued conversation"
_TITLE_MAX = 500

NO_SUMMARY_TO_EDIT = "There is no summary to edit yet: compress the memory first."
NO_SUMMARY_TO_CONTINUE = (
    "This conversation has no summary yet: compress it first, then continue from it."
)


@dataclass(frozen=True, slots=True)
class SummaryRecord:
    """One stored summary version, as read."""

    id: str
    conversation_id: str
    version: int
    first_message_id: str | None
    through_message_id: str | None
    message_count: int
    text: str
    focus: str | None
    cost: float
    model: str | None
    tokens_estimate: int
    tokens_o200k: int
    tokens_cl100k: int
    created_at: datetime
    #: CTX-24: what the fact guard kept verbatim and what the cap left out.
    facts: FactRecord = EMPTY


def _record(row: Summary) -> SummaryRecord:
    return SummaryRecord(
        row.id,
        row.conversation_id,
        row.version,
        row.first_message_id,
        row.through_message_id,
        row.message_count,
        row.text,
        row.focus,
        row.cost,
        row.model,
        row.tokens_estimate,
        row.tokens_o200k,
        row.tokens_cl100k,
        row.created_at,
        read_record(row.facts),
    )


def newest_summary(session: Session, conversation_id: str) -> SummaryRecord | None:
    """The current (highest) version, or None when the conversation has no summary."""
    row = session.scalars(
        select(Summary)
        .where(Summary.conversation_id == conversation_id)
        .order_by(Summary.version.desc())
        .limit(1)
    ).first()
    return _record(row) if row is not None else None


def is_edited(summary: SummaryRecord) -> bool:
    return summary.model == EDITED_BY_USER


def checked_text(text: str) -> str:
    """The edited text as given; refuses an empty one and one over the size limit."""
    if not text.strip():
        raise InvalidInput("text: write the summary first; it cannot be empty.")
    if len(text) > MAX_SUMMARY_CHARS:
        raise InvalidInput(f"text: a summary is at most {MAX_SUMMARY_CHARS:,} characters.")
    return text


def edited_record(record: FactRecord, text: str) -> FactRecord:
    """CTX-24 after an edit: the kept facts the user's text still holds stay kept (a fact
    the user deleted is the user's decision, not the cap's: it is neither kept nor dropped,
    and ``recall`` still finds it); what the cap left out stays left out."""
    seen = normalise(text)
    kept = tuple(fact for fact in record.kept if contains(seen, normalise(fact.text)))
    held = tuple(fact for fact in record.held if contains(seen, normalise(fact.text)))
    return FactRecord(kept, record.dropped, record.dropped_count, held)


def edit_summary(session: Session, conversation: ConversationRecord, text: str) -> SummaryRecord:
    """A new version with the user's text over the same messages as the current one (the
    fact guard's record as :func:`edited_record` says)."""
    text = checked_text(text)
    current = newest_summary(session, conversation.id)
    if current is None:
        raise NothingToCompress(NO_SUMMARY_TO_EDIT)
    edited = Summary(
        conversation_id=conversation.id,
        version=current.version + 1,
        first_message_id=current.first_message_id,
        through_message_id=current.through_message_id,
        message_count=current.message_count,
        text=text,
        focus=current.focus,
        cost=0.0,
        model=EDITED_BY_USER,
        created_at=utcnow(),
        facts=edited_record(current.facts, text).stored(),
        **counts_for_text(text),
    )
    session.add(edited)
    session.flush()
    return _record(edited)


def add_summary(
    session: Session,
    conversation_id: str,
    *,
    first_message_id: str | None,
    through_message_id: str | None,
    message_count: int,
    text: str,
    focus: str | None,
    cost: float,
    model: str | None,
    facts: FactRecord = EMPTY,
) -> SummaryRecord:
    """The next version of the conversation's summary (a compaction round's, CTX-12, with
    the fact guard's record, CTX-24), as stored."""
    version = (
        session.scalar(
            select(func.max(Summary.version)).where(Summary.conversation_id == conversation_id)
        )
        or 0
    ) + 1
    row = Summary(
        conversation_id=conversation_id,
        version=version,
        first_message_id=first_message_id,
        through_message_id=through_message_id,
        message_count=message_count,
        text=text,
        focus=focus,
        cost=cost,
        model=model,
        created_at=utcnow(),
        facts=facts.stored(),
        **counts_for_text(text),
    )
    session.add(row)
    session.flush()
    return _record(row)


def _continued_title(title: str) -> str:
    title = title.strip()
    if not title:
        return CONTINUED_UNTITLED
    return title[: _TITLE_MAX - len(CONTINUED_SUFFIX)].rstrip() + CONTINUED_SUFFIX


def continue_in_new_conversation(
    session: Session, user: Account, source: ConversationRecord, limits: Limits
) -> ConversationRecord:
    """The new conversation, starting from ``source``'s current summary."""
    summary = newest_summary(session, source.id)
    if summary is None:
        raise NothingToCompress(NO_SUMMARY_TO_CONTINUE)
    # Read before creating: the new conversation's quota may evict the source (STORE-4).
    carried = {
        "text": summary.text,
        "focus": summary.focus,
        "model": summary.model,
        # CTX-24: the record travels with the text (its message ids name the source's).
        "facts": summary.facts.stored(),
        **{column: getattr(summary, column) for column in TOKEN_COLUMNS.values()},
    }
    continued = create_conversation(
        session,
        user,
        limits,
        title=_continued_title(source.title),
        folder_id=source.folder_id,
        mode=source.mode,
        profile_id=source.profile_id,
        instructions=source.instructions,
        source_conversation_id=source.id,
    )
    session.add(
        Summary(
            conversation_id=continued.id,
            version=1,
            first_message_id=None,
            through_message_id=None,  # covers none of the new conversation's messages
            message_count=0,
            cost=0.0,  # nothing is spent here: the text was paid for in the source
            created_at=utcnow(),
            **carried,
        )
    )
    session.flush()
    return continued
