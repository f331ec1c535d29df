"""Versions of answers and questions (PROJ-3): regenerate, edit and resend, switch.

Theory of operation
-------------------
The history stays one line of messages in ``seq`` order; what changes is which of them are
*shown*.  A *slot* has versions, exactly one shown:

- the **answer** to a question (``kind`` "answer", ``slot`` = the question's id): Regenerate
  hides the answer shown and a new turn answers the same question again (no second copy of
  the question is stored); Retry after a failed turn is the same thing;
- a **question** edited and sent again (``kind`` "question", ``slot`` = the first version's
  id): the question and its answer are hidden and the new question is stored and answered
  as a new turn.

Hidden messages keep their place and their ids, carry ``messages.hidden`` and are never sent:
the engine loader skips them (:class:`chatmem.store.engine.LazyMessages`), so the plan and
every status treat them as not there ("hidden" in the statuses shown).  Only the last
question can be edited and only its answer regenerated (that is where a new turn goes);
any slot can be switched later, and the messages after it stay as they are.

A version's ``message_ids`` are taken when it is hidden (the visible answers of its question
at that moment); the version shown may still be growing — its turn appends to it.  An answer
version that ended up empty (a turn that failed before saying anything) is not kept: it is
dropped when another version takes its place, so Retry does not count attempts.  Versions
are numbered in creation order; the API's index is the position (1 …).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Any

from sqlalchemy import ColumnElement, func, select, update
from sqlalchemy.orm import Session

from chatmem.errors import InvalidInput, NotFound
from chatmem.store.conversations import ConversationRecord, touch_conversation
from chatmem.store.engine import SHOWN
from chatmem.store.messages import MESSAGE_COLUMNS, MessageRecord
from chatmem.store.tables.conversations import (
    File,
    Message,
    MessageVersion,
    Summary,
)
from chatmem.store.tables.runs import Run

ANSWER = "answer"
QUESTION = "question"


@dataclass(frozen=True, slots=True)
class VersionOf:
    """Where a message stands among its slot's versions (1-based ``index`` of ``count``)."""

    kind: str
    index: int
    count: int


@dataclass(frozen=True, slots=True)
class FailedTurn:
    """A question's last turn failed: its run and the error it stored."""

    run_id: str
    code: str
    message: str


# -- reading ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class VersionRecord:
    """One version of a slot, as read (the columns of ``message_versions`` but its time)."""

    id: str
    conversation_id: str
    kind: str
    slot: str
    number: int
    shown: bool
    message_ids: list[str]


def _message(session: Session, *conditions: ColumnElement[bool]) -> MessageRecord | None:
    """The newest message that meets ``conditions``, read as its record's columns."""
    row = session.execute(
        select(*MESSAGE_COLUMNS).where(*conditions).order_by(Message.seq.desc()).limit(1)
    ).first()
    return MessageRecord(*row) if row is not None else None


def _shown_message(
    session: Session, conversation: ConversationRecord, message_id: str
) -> MessageRecord:
    row = _message(
        session, Message.id == message_id, Message.conversation_id == conversation.id, SHOWN
    )
    if row is None:
        raise NotFound("message")
    return row


def last_question(session: Session, conversation_id: str) -> MessageRecord | None:
    """The newest shown user message."""
    return _message(
        session, Message.conversation_id == conversation_id, Message.role == "user", SHOWN
    )


def question_of(session: Session, message: MessageRecord) -> MessageRecord | None:
    """The shown question a shown message answers (None before the first question)."""
    return _message(
        session,
        Message.conversation_id == message.conversation_id,
        Message.role == "user",
        Message.seq < message.seq,
        SHOWN,
    )


def answer_ids(session: Session, question: MessageRecord) -> list[str]:
    """The shown messages that answer ``question``: up to the next shown question."""
    scope = [Message.conversation_id == question.conversation_id, SHOWN]
    following = session.scalar(
        select(func.min(Message.seq)).where(
            *scope, Message.role == "user", Message.seq > question.seq
        )
    )
    bounds = [*scope, Message.seq > question.seq]
    if following is not None:
        bounds.append(Message.seq < following)
    return list(session.scalars(select(Message.id).where(*bounds).order_by(Message.seq)))


def _slot(session: Session, conversation_id: str, kind: str, slot: str) -> list[MessageVersion]:
    """The slot's versions as rows, for the changes below (they never leave this module)."""
    return list(
        session.scalars(
            select(MessageVersion)
            .where(
                MessageVersion.conversation_id == conversation_id,
                MessageVersion.kind == kind,
                MessageVersion.slot == slot,
            )
            .order_by(MessageVersion.number)
        )
    )


def _question_slot(
    session: Session, conversation_id: str, question_id: str
) -> list[MessageVersion]:
    """The versions of the question slot ``question_id`` is a version of ([] when none)."""
    for row in conversation_versions(session, conversation_id):
        if row.kind == QUESTION and question_id in row.message_ids:
            return _slot(session, conversation_id, QUESTION, row.slot)
    return []


def conversation_versions(session: Session, conversation_id: str) -> list[VersionRecord]:
    """Every version of a conversation (few: one per regenerate or edit)."""
    return [
        VersionRecord(*row)
        for row in session.execute(
            select(*(getattr(MessageVersion, field.name) for field in fields(VersionRecord)))
            .where(MessageVersion.conversation_id == conversation_id)
            .order_by(MessageVersion.kind, MessageVersion.slot, MessageVersion.number)
        )
    ]


def version_map(session: Session, rows: Sequence[MessageRecord]) -> dict[str, VersionOf]:
    """For the messages ``rows`` (one conversation, in ``seq`` order, shown and hidden
    alike): where each stands among its slot's versions, for those in a slot of two or
    more versions."""
    if not rows:
        return {}
    conversation_id = rows[0].conversation_id
    slots: dict[tuple[str, str], list[VersionRecord]] = {}
    for version in conversation_versions(session, conversation_id):
        slots.setdefault((version.kind, version.slot), []).append(version)
    if not any(len(group) > 1 for group in slots.values()):
        return {}
    out: dict[str, VersionOf] = {}
    shown_answers: dict[str, VersionOf] = {}  # question id -> the shown answer's place
    for (kind, _slot_id), group in slots.items():
        if len(group) < 2:
            continue
        for index, version in enumerate(group, start=1):
            place = VersionOf(kind, index, len(group))
            if kind == ANSWER and version.shown:
                shown_answers[version.slot] = place
            for message_id in version.message_ids:
                out.setdefault(message_id, place)
    if shown_answers:
        # A shown answer's messages are the shown messages after its question.
        first = rows[0]
        question = None if first.role == "user" else question_of(session, first)
        current = question.id if question is not None else None
        for row in rows:
            if row.hidden:
                continue
            if row.role == "user":
                current = row.id
            elif current in shown_answers:
                out[row.id] = shown_answers[current]
    return out


def failed_turns(session: Session, conversation_id: str) -> dict[str, FailedTurn]:
    """Question id -> the error of its last turn, for questions whose last turn failed
    (shown in place with Retry, from the stored run)."""
    failed = session.execute(
        select(Run.id, Run.user_message_id, Run.error_code, Run.error_message).where(
            Run.conversation_id == conversation_id, Run.status == "failed"
        )
    ).all()
    if not failed:
        return {}
    questions = {r.user_message_id for r in failed if r.user_message_id}
    latest: dict[str | None, str] = {}
    for run_id, question_id in session.execute(
        select(Run.id, Run.user_message_id)
        .where(Run.conversation_id == conversation_id, Run.user_message_id.in_(questions))
        .order_by(Run.created_at, Run.id)
    ):
        latest[question_id] = run_id
    return {
        r.user_message_id: FailedTurn(
            r.id, r.error_code or "error", r.error_message or "The turn failed."
        )
        for r in failed
        if r.user_message_id and latest.get(r.user_message_id) == r.id
    }


def hidden_ids(session: Session, conversation_id: str) -> list[str]:
    """The hidden messages' ids (status "hidden": kept, never sent)."""
    return list(
        session.scalars(
            select(Message.id)
            .where(Message.conversation_id == conversation_id, Message.hidden == True)  # noqa: E712
            .order_by(Message.seq)
        )
    )


# -- changing --------------------------------------------------------------------------------


def _set_hidden(session: Session, ids: Sequence[str], hidden: bool) -> None:
    if ids and hidden:
        _refuse_summarized(session, ids)
    if ids:
        session.execute(
            update(Message)
            .where(Message.id.in_(list(ids)))
            .values(hidden=hidden)
            .execution_options(synchronize_session="fetch")
        )


def _refuse_summarized(session: Session, ids: Sequence[str]) -> None:
    """The memory's summary ends at a message (CTX-9): that message cannot be hidden, or
    the summary would cover nothing left."""
    through = session.scalar(
        select(Summary.through_message_id)
        .join(Message, Message.conversation_id == Summary.conversation_id)
        .where(Message.id == ids[0])
        .order_by(Summary.version.desc())
        .limit(1)
    )
    if through is not None and through in ids:
        raise InvalidInput(
            "This part of the conversation is already summarised in the memory: its version "
            "cannot change."
        )


def _next_number(rows: Sequence[MessageVersion]) -> int:
    return max((r.number for r in rows), default=0) + 1


def _put_away_answer(
    session: Session, question: MessageRecord
) -> tuple[list[MessageVersion], MessageVersion | None]:
    """Hides the answer shown for ``question`` as a version of its slot (created when this
    is its first); an empty answer is no version.  Returns the slot's remaining versions
    (none of them shown afterwards) and the one put away (None when it was empty)."""
    ids = answer_ids(session, question)
    rows = _slot(session, question.conversation_id, ANSWER, question.id)
    shown = next((r for r in rows if r.shown), None)
    if shown is not None and not ids:
        rows.remove(shown)
        session.delete(shown)
        session.flush()  # before a new version takes its number
        shown = None
    elif shown is not None:
        shown.message_ids, shown.shown = ids, False
    elif ids:
        shown = MessageVersion(
            conversation_id=question.conversation_id,
            kind=ANSWER,
            slot=question.id,
            number=_next_number(rows),
            shown=False,
            message_ids=ids,
        )
        rows.append(shown)
        session.add(shown)
    _set_hidden(session, ids, True)
    return rows, shown


def _show_answer(session: Session, question: MessageRecord) -> None:
    """Shows the version of ``question``'s answer that is marked shown (after the question
    itself was shown again)."""
    for row in _slot(session, question.conversation_id, ANSWER, question.id):
        if row.shown:
            _set_hidden(session, row.message_ids, False)


def _touch(session: Session, conversation: ConversationRecord) -> None:
    # The plan version (the context endpoint's cache key) follows the conversation's row.
    touch_conversation(session, conversation.id)


def begin_regenerate(session: Session, conversation: ConversationRecord, message_id: str) -> str:
    """Puts the last answer away as a version (``message_id``: the last question or a
    message of its answer) and returns the question to answer again; the new turn's answer
    is the slot's new shown version."""
    target = _shown_message(session, conversation, message_id)
    question = last_question(session, conversation.id)
    if question is None or target.seq < question.seq:
        raise InvalidInput("Only the last answer can be regenerated.")
    rows, _ = _put_away_answer(session, question)
    if rows:
        session.add(
            MessageVersion(
                conversation_id=conversation.id,
                kind=ANSWER,
                slot=question.id,
                number=_next_number(rows),
                shown=True,
                message_ids=[],
            )
        )
    _touch(session, conversation)
    session.flush()
    return question.id


@dataclass(frozen=True)
class Edit:
    """A question being edited: its slot, the number its new version gets, and the files
    sent with the question it replaces (they go with the new one)."""

    slot: str
    number: int
    files: tuple[str, ...] = ()


def begin_edit(session: Session, conversation: ConversationRecord, message_id: str) -> Edit:
    """Hides the last question and its answer as a version of the question's slot; the
    caller stores the new question and calls :func:`finish_edit`."""
    target = _shown_message(session, conversation, message_id)
    question = last_question(session, conversation.id)
    if question is None or target.id != question.id:
        raise InvalidInput("Only the last question can be edited.")
    _hide_question(session, question)
    rows = _question_slot(session, conversation.id, question.id)
    if rows:
        for row in rows:
            row.shown = False
        slot, number = rows[0].slot, _next_number(rows)
    else:
        session.add(
            MessageVersion(
                conversation_id=conversation.id,
                kind=QUESTION,
                slot=question.id,
                number=1,
                shown=False,
                message_ids=[question.id],
            )
        )
        slot, number = question.id, 2
    # The files sent with the question go with its new version; until it is stored they
    # are the conversation's (planned as a new turn's attachments are).
    files = tuple(session.scalars(select(File.id).where(File.message_id == question.id)))
    if files:
        session.execute(
            update(File)
            .where(File.id.in_(files))
            .values(message_id=None)
            .execution_options(synchronize_session="fetch")
        )
    _touch(session, conversation)
    session.flush()
    return Edit(slot, number, files)


def finish_edit(session: Session, conversation_id: str, edit: Edit, question_id: str) -> None:
    """The new question ``question_id`` (stored) is the shown version of the slot; the
    files sent with the question it replaces go with it."""
    session.add(
        MessageVersion(
            conversation_id=conversation_id,
            kind=QUESTION,
            slot=edit.slot,
            number=edit.number,
            shown=True,
            message_ids=[question_id],
        )
    )
    if edit.files:
        session.execute(
            update(File)
            .where(File.id.in_(edit.files))
            .values(message_id=question_id)
            .execution_options(synchronize_session="fetch")
        )
    session.flush()


def _hide_question(session: Session, question: MessageRecord) -> None:
    """Hides a question with its answer; the answer's version stays the one marked shown,
    to come back with the question."""
    rows, put_away = _put_away_answer(session, question)
    if put_away is None and rows:
        put_away = rows[-1]
    if put_away is not None:
        put_away.shown = True
    _set_hidden(session, [question.id], True)


def _move_files(session: Session, sources: Sequence[str], question_id: str) -> None:
    if sources:
        session.execute(
            update(File)
            .where(File.message_id.in_(list(sources)))
            .values(message_id=question_id)
            .execution_options(synchronize_session="fetch")
        )


def switch(
    session: Session, conversation: ConversationRecord, message_id: str, index: int
) -> dict[str, Any]:
    """Shows version ``index`` (1-based) of the slot the shown message ``message_id``
    belongs to: its question's versions for a question, its answer's for an answer."""
    message = _shown_message(session, conversation, message_id)
    if message.role == "user":
        rows = _question_slot(session, conversation.id, message.id)
        kind = QUESTION
    else:
        question = question_of(session, message)
        rows = _slot(session, conversation.id, ANSWER, question.id) if question else []
        kind = ANSWER
    if len(rows) < 2:
        raise InvalidInput("This message has no other versions.")
    if not 1 <= index <= len(rows):
        raise InvalidInput(f"index: choose a version from 1 to {len(rows)}")
    target = rows[index - 1]
    if not target.shown:
        if kind == QUESTION:
            _switch_question(session, conversation, rows, target)
        else:
            assert question is not None
            remaining, _ = _put_away_answer(session, question)
            target = next(r for r in remaining if r.id == target.id)
            target.shown = True
            _set_hidden(session, target.message_ids, False)
            rows = remaining
        _touch(session, conversation)
        session.flush()
    return {"kind": kind, "version": rows.index(target) + 1, "versions": len(rows)}


def _switch_question(
    session: Session,
    conversation: ConversationRecord,
    rows: Sequence[MessageVersion],
    target: MessageVersion,
) -> None:
    questions = {
        q.id: q
        for q in (
            MessageRecord(*row)
            for row in session.execute(
                select(*MESSAGE_COLUMNS).where(
                    Message.conversation_id == conversation.id,
                    Message.id.in_([mid for r in rows for mid in r.message_ids]),
                )
            )
        )
    }
    shown = [questions[mid] for r in rows if r.shown for mid in r.message_ids if mid in questions]
    for question in shown:
        if not question.hidden:
            _hide_question(session, question)
    for row in rows:
        row.shown = row is target
    chosen = [questions[mid] for mid in target.message_ids if mid in questions]
    for question in chosen:
        _set_hidden(session, [question.id], False)
        _show_answer(session, question)
        _move_files(session, [q.id for q in shown], question.id)
