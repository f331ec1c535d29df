"""File repository (CTX-16): text files attached to a conversation, with token counts and a
state (``auto`` follows its message in and out of memory, ``pinned`` is always sent,
``excluded`` never).  Ownership goes through the conversation."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

from sqlalchemy import Connection, insert, select, update
from sqlalchemy.orm import Session

from chatmem.errors import InvalidInput, NotFound
from chatmem.store.accounts import Account
from chatmem.store.db import connection_of
from chatmem.store.tables.conversations import Conversation, File, Message
from chatmem.store.token_counts import counts_for_text
from chatmem.store.types import new_id, utcnow

if TYPE_CHECKING:  # conversations imports projects, which imports this module
    from chatmem.store.conversations import ConversationRecord

FILE_STATES = ("auto", "pinned", "excluded")
MAX_NAME = 500


def check_state(state: str) -> str:
    if state not in FILE_STATES:
        raise InvalidInput(f"Unknown file state {state!r}; use one of {', '.join(FILE_STATES)}.")
    return state


def add_file(
    session: Session,
    conversation: ConversationRecord,
    name: str,
    content: str,
    *,
    message_id: str | None = None,
    state: str = "auto",
) -> FileRecord:
    """Stores a text file of the conversation (of one of its messages with ``message_id``)
    and answers it as stored."""
    name = name.strip()
    if not name or len(name) > MAX_NAME:
        raise InvalidInput(f"A file name is 1 to {MAX_NAME} characters.")
    if "\x00" in content:
        raise InvalidInput("Only text files can be attached.")
    if message_id is not None:
        found = session.scalar(
            select(Message.id).where(
                Message.id == message_id, Message.conversation_id == conversation.id
            )
        )
        if found is None:
            raise NotFound("message")
    row = File(
        conversation_id=conversation.id,
        message_id=message_id,
        name=name,
        content=content,
        state=check_state(state),
        size=len(content.encode("utf-8")),
        created_at=utcnow(),
        **counts_for_text(content),
    )
    session.add(row)
    session.execute(
        update(Conversation).where(Conversation.id == conversation.id).values(updated_at=utcnow())
    )
    session.flush()
    return _record(row)


class Attachment(Protocol):
    """A binary file to store (a tool result's attachment is one)."""

    @property
    def name(self) -> str: ...

    @property
    def mime(self) -> str: ...

    @property
    def data(self) -> bytes: ...


_INSERT_FILES = insert(File)


def add_attachments(
    session: Session | Connection,
    conversation_id: str,
    message_id: str,
    attachments: Sequence[Attachment],
) -> list[dict[str, Any]]:
    """Stores each attachment as a file of the message (PROV-4; state ``auto``, no text);
    returns their public descriptions (id, name, mime, size)."""
    now = utcnow()
    rows = [
        {
            "id": new_id(),
            "conversation_id": conversation_id,
            "message_id": message_id,
            "name": attachment.name,
            "content": "",
            "state": "auto",
            "size": len(attachment.data),
            "mime": attachment.mime,
            "data": attachment.data,
            "created_at": now,
            **counts_for_text(""),
        }
        for attachment in attachments
    ]
    if rows:
        connection_of(session).execute(_INSERT_FILES, rows)
    return [
        {"id": row["id"], "name": row["name"], "mime": row["mime"], "size": row["size"]}
        for row in rows
    ]


@dataclass(frozen=True, slots=True)
class FileRecord:
    """One stored file as read, without a binary attachment's bytes (PROV-4: only the
    content endpoint reads them, :func:`owned_file_data`)."""

    id: str
    conversation_id: str
    message_id: str | None
    name: str
    content: str
    state: str
    size: int
    mime: str | None
    width: int | None
    height: int | None
    tokens_estimate: int
    tokens_o200k: int
    tokens_cl100k: int
    created_at: datetime


def _record(row: File) -> FileRecord:
    return FileRecord(
        row.id,
        row.conversation_id,
        row.message_id,
        row.name,
        row.content,
        row.state,
        row.size,
        row.mime,
        row.width,
        row.height,
        row.tokens_estimate,
        row.tokens_o200k,
        row.tokens_cl100k,
        row.created_at,
    )


def owned_file(session: Session, user: Account, file_id: str) -> FileRecord:
    """The file, when its conversation is the user's and not archived (else NotFound,
    STORE-1)."""
    return _record(_owned_file_row(session, user, file_id))


def owned_file_data(
    session: Session, user: Account, file_id: str
) -> tuple[FileRecord, bytes | None]:
    """:func:`owned_file` with a binary attachment's bytes (None for a text file)."""
    row = _owned_file_row(session, user, file_id)
    return _record(row), row.data


def set_file_state(session: Session, user: Account, file_id: str, state: str) -> FileRecord:
    """Sets the state (CTX-16) of the user's file and returns it as stored."""
    row = _owned_file_row(session, user, file_id)
    row.state = check_state(state)
    session.flush()
    return _record(row)


def _owned_file_row(session: Session, user: Account, file_id: str) -> File:
    row = session.execute(
        select(File)
        .join(Conversation, Conversation.id == File.conversation_id)
        .where(
            File.id == file_id,
            Conversation.user_id == user.id,
            Conversation.archived_at.is_(None),
        )
    ).first()
    if row is None:
        raise NotFound("file")
    return row[0]


def conversation_files(session: Session, conversation_id: str) -> list[FileRecord]:
    return [
        _record(row)
        for row in session.scalars(
            select(File)
            .where(File.conversation_id == conversation_id)
            .order_by(File.created_at, File.id)
        )
    ]


def conversation_file_ids(
    session: Session, conversation_id: str, file_ids: Sequence[str]
) -> set[str]:
    """Which of ``file_ids`` are files of the conversation (a turn attaches only its own)."""
    return set(
        session.scalars(
            select(File.id).where(File.id.in_(file_ids), File.conversation_id == conversation_id)
        )
    )


def attach_files(session: Session, file_ids: Sequence[str], message_id: str) -> None:
    """The files go with the message they were sent with (PROJ-2)."""
    session.execute(update(File).where(File.id.in_(file_ids)).values(message_id=message_id))
