"""Folder and conversation repository: ownership, create/change/delete, the paged list.

Every lookup is scoped to its owner: :func:`owned_conversation` and :func:`owned_folder` answer
a foreign id exactly like a missing one (``NotFound``, STORE-1).  Lists are keyset-paged in the
order pinned first, then most recently active (index ``ix_conversations_list``), so page N
costs the same as page 1 with tens of thousands of conversations (STORE-7).
"""

from __future__ import annotations

import base64
import json
from dataclasses import asdict, dataclass, replace
from dataclasses import fields as dataclass_fields
from datetime import UTC, datetime
from functools import cache
from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    ColumnElement,
    Integer,
    Select,
    String,
    bindparam,
    delete,
    func,
    insert,
    select,
    tuple_,
    update,
)
from sqlalchemy.orm import Session

from chatmem.context.values import MODES
from chatmem.errors import InvalidInput, NotFound
from chatmem.store import projects, quotas
from chatmem.store.accounts import Account
from chatmem.store.quotas import Limits
from chatmem.store.search import search_source, search_values
from chatmem.store.tables.accounts import User
from chatmem.store.tables.conversations import Conversation, Folder, Message
from chatmem.store.types import UTCDateTime, new_id, utcnow

MAX_PAGE = 200
DEFAULT_PAGE = 50


# --- folders -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FolderRecord:
    """One folder as read."""

    id: str
    user_id: str
    name: str
    created_at: datetime


_FOLDER_COLUMNS = (Folder.id, Folder.user_id, Folder.name, Folder.created_at)
_FOLDER_BY_ID = select(*_FOLDER_COLUMNS).where(Folder.id == bindparam("folder_id", type_=String()))


def owned_folder(session: Session, user: Account, folder_id: str) -> FolderRecord:
    row = session.execute(_FOLDER_BY_ID, {"folder_id": folder_id}).first()
    if row is None or row.user_id != user.id:
        raise NotFound("folder")
    return FolderRecord(*row)


def _folder_record(folder: Folder) -> FolderRecord:
    return FolderRecord(folder.id, folder.user_id, folder.name, folder.created_at)


def list_folders(session: Session, user: Account) -> list[FolderRecord]:
    return [
        _folder_record(folder)
        for folder in session.scalars(
            select(Folder).where(Folder.user_id == user.id).order_by(Folder.name, Folder.id)
        )
    ]


def _folder_name(name: str) -> str:
    name = name.strip()
    if not name or len(name) > 200:
        raise InvalidInput("A folder name is 1 to 200 characters.")
    return name


def create_folder(session: Session, user: Account, name: str, limits: Limits) -> FolderRecord:
    quotas.check_folder_quota(session, user, limits)
    folder = Folder(user_id=user.id, name=_folder_name(name), created_at=utcnow())
    session.add(folder)
    session.flush()
    return _folder_record(folder)


def rename_folder(session: Session, folder: FolderRecord, name: str) -> FolderRecord:
    """The folder under its new name, as stored."""
    name = _folder_name(name)
    session.execute(update(Folder).where(Folder.id == folder.id).values(name=name))
    return replace(folder, name=name)


def delete_folder(session: Session, folder: FolderRecord) -> None:
    """Deletes the folder; its conversations stay, without a folder (STORE-6: nothing else)."""
    session.query(Conversation).filter(Conversation.folder_id == folder.id).update(
        {Conversation.folder_id: None}, synchronize_session=False
    )
    session.execute(delete(Folder).where(Folder.id == folder.id))


# --- conversations ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ConversationRecord:
    """One conversation as read (the columns of ``conversations`` but its import source and
    ``meta``)."""

    id: str
    user_id: str
    title: str
    folder_id: str | None
    pinned: bool
    mode: str
    profile_id: str | None
    instructions: str
    created_at: datetime
    updated_at: datetime
    last_active_at: datetime
    archived_at: datetime | None
    source_conversation_id: str | None
    recall: bool | None
    project_id: str | None


#: The record's fields, in order: the columns a conversation is read by.
_RECORD_FIELDS = tuple(field.name for field in dataclass_fields(ConversationRecord))


_BY_ID = select(*(getattr(Conversation, name) for name in _RECORD_FIELDS)).where(
    Conversation.id == bindparam("conversation_id", type_=String())
)


def _read(session: Session, conversation_id: str) -> ConversationRecord | None:
    """The conversation's columns, not an ORM object (every request of a conversation reads
    it, a turn first of all)."""
    row = session.execute(_BY_ID, {"conversation_id": conversation_id}).first()
    return ConversationRecord(*row) if row is not None else None


def owned_conversation(
    session: Session, user: Account, conversation_id: str, *, archived: bool = False
) -> ConversationRecord:
    """The user's conversation; archived ones only when asked for (ARCH-1)."""
    conversation = _read(session, conversation_id)
    if (
        conversation is None
        or conversation.user_id != user.id
        or (conversation.archived_at is not None and not archived)
    ):
        raise NotFound("conversation")
    return conversation


def owned_conversation_row(
    session: Session, user_id: str, conversation_id: str
) -> ConversationRecord:
    """:func:`owned_conversation` by the user's id (the turn path has no ``User``): never an
    archived one."""
    conversation = _read(session, conversation_id)
    if (
        conversation is None
        or conversation.user_id != user_id
        or conversation.archived_at is not None
    ):
        raise NotFound("conversation")
    return conversation


def conversation_by_id(session: Session, conversation_id: str) -> ConversationRecord | None:
    """The conversation whoever owns it (what a run left behind is stored in its own)."""
    return _read(session, conversation_id)


def touch_conversation(session: Session, conversation_id: str) -> None:
    """The conversation changed (its ``updated_at`` is now): what keys a cached plan."""
    session.execute(
        update(Conversation).where(Conversation.id == conversation_id).values(updated_at=utcnow())
    )


def set_conversation_profile(session: Session, conversation_id: str, profile_id: str) -> None:
    """The conversation is answered by ``profile_id`` from now on."""
    session.execute(
        update(Conversation).where(Conversation.id == conversation_id).values(profile_id=profile_id)
    )


def check_mode(mode: str) -> str:
    if mode not in MODES:
        raise InvalidInput(f"Unknown mode {mode!r}; use one of {', '.join(MODES)}.")
    return mode


def _title(title: str) -> str:
    title = title.strip()
    if len(title) > 500:
        raise InvalidInput("A title is at most 500 characters.")
    return title


def create_conversation(
    session: Session,
    user: Account,
    limits: Limits,
    *,
    title: str = "",
    folder_id: str | None = None,
    pinned: bool = False,
    mode: str = "full",
    profile_id: str | None = None,
    instructions: str = "",
    conversation_id: str | None = None,
    recall: bool | None = None,
    project_id: str | None = None,
    source_conversation_id: str | None = None,
) -> ConversationRecord:
    """``conversation_id``: the new conversation's id when the caller needs it first (to
    take its lock before it exists); a fresh one otherwise.  ``project_id``: one of the
    user's projects (PROJ-1).  ``source_conversation_id``: the one it continues (CTX-23)."""
    if folder_id is not None:
        owned_folder(session, user, folder_id)
    projects.check_project(session, user.id, project_id)
    now = utcnow()
    conversation = ConversationRecord(
        id=conversation_id or new_id(),
        user_id=user.id,
        title=_title(title),
        folder_id=folder_id,
        pinned=pinned,
        mode=check_mode(mode),
        profile_id=profile_id,
        instructions=instructions,
        created_at=now,
        updated_at=now,
        last_active_at=now,
        archived_at=None,
        source_conversation_id=source_conversation_id,
        recall=recall,
        project_id=project_id,
    )
    session.execute(insert(Conversation).values(**asdict(conversation)))
    quotas.enforce_conversation_quota(session, user, limits)
    return conversation


def create_conversation_as(
    session: Session,
    user_id: str,
    limits: Limits,
    *,
    title: str,
    mode: str,
    folder_id: str | None,
    instructions: str,
    profile_id: str | None,
    conversation_id: str,
) -> None:
    """:func:`create_conversation` by the owner's id (the turn path has no ``User``)."""
    user = session.get(User, user_id)
    if user is None:  # pragma: no cover - tokens cascade with their user
        raise NotFound("user")
    create_conversation(
        session,
        user,
        limits,
        title=title,
        mode=mode,
        folder_id=folder_id,
        instructions=instructions,
        profile_id=profile_id,
        conversation_id=conversation_id,
    )


def update_conversation(
    session: Session, user: Account, conversation: ConversationRecord, changes: dict[str, Any]
) -> ConversationRecord:
    """Applies a PATCH: only keys present in ``changes`` change (``None`` clears folder/profile).
    Returns the conversation as stored."""
    values: dict[str, Any] = {}
    if "title" in changes:
        if changes["title"] is None:
            raise InvalidInput("title: must be a string")
        values["title"] = _title(changes["title"])
    if "folder_id" in changes:
        if changes["folder_id"] is not None:
            owned_folder(session, user, changes["folder_id"])
        values["folder_id"] = changes["folder_id"]
    if "pinned" in changes:
        if changes["pinned"] is None:
            raise InvalidInput("pinned: must be a boolean")
        values["pinned"] = bool(changes["pinned"])
    if "mode" in changes:
        if changes["mode"] is None:
            raise InvalidInput("mode: must be a string")
        values["mode"] = check_mode(changes["mode"])
    if "profile_id" in changes:
        values["profile_id"] = changes["profile_id"]
    if "instructions" in changes:
        values["instructions"] = changes["instructions"] or ""
    if "recall" in changes:  # issue 17: None follows the profile and the mode again
        values["recall"] = changes["recall"]
    if "project_id" in changes:  # PROJ-1: moved into one of the user's projects, or out
        projects.check_project(session, user.id, changes["project_id"])
        values["project_id"] = changes["project_id"]
    values["updated_at"] = utcnow()
    session.execute(update(Conversation).where(Conversation.id == conversation.id).values(values))
    return replace(conversation, **values)


def delete_conversation(session: Session, conversation: ConversationRecord) -> None:
    """Deletes the conversation with everything it holds (the tables cascade)."""
    session.execute(delete(Conversation).where(Conversation.id == conversation.id))


def message_count(session: Session, conversation_id: str) -> int:
    return (
        session.scalar(
            select(func.count())
            .select_from(Message)
            .where(Message.conversation_id == conversation_id)
        )
        or 0
    )


# --- the paged list -------------------------------------------------------------------------


@dataclass(frozen=True)
class Page:
    items: list[ConversationRecord]
    next_cursor: str | None


def encode_cursor(conversation: ConversationRecord) -> str:
    raw = json.dumps(
        [int(conversation.pinned), conversation.last_active_at.isoformat(), conversation.id]
    )
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


#: Far longer than any cursor :func:`encode_cursor` writes (about 110 characters).
_MAX_CURSOR = 512


def decode_cursor(cursor: str) -> tuple[bool, datetime, str]:
    """The position :func:`encode_cursor` wrote, or InvalidInput.  A cursor is the client's
    text: only what this server could have written reaches the statement — a NUL or a lone
    surrogate in the id, or a time that leaves the calendar once in UTC, failed there (500)."""
    try:
        if len(cursor) > _MAX_CURSOR:
            raise ValueError("too long")
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        pinned, when, cid = json.loads(raw)
        if pinned not in (0, 1) or not isinstance(when, str) or not isinstance(cid, str):
            raise ValueError("not a position")
        moment = datetime.fromisoformat(when)
        moment = moment.replace(tzinfo=moment.tzinfo or UTC).astimezone(UTC)
        if "\x00" in cid:
            raise ValueError("NUL in the id")
        cid.encode()  # a lone surrogate: UnicodeEncodeError
        return bool(pinned), moment, cid
    except (ValueError, TypeError, OverflowError) as exc:
        raise InvalidInput("cursor: malformed; pass back next_cursor unchanged") from exc


@cache
def _list_statement(search: str | None, folder: bool, cursor: bool, offset: bool) -> Select[Any]:
    """The list's statement for one shape (``search``: the dialect whose full-text source
    it reads, :func:`~chatmem.store.search.search_source`), built once: constructing it costs
    SQLAlchemy more than the database takes to run it.  Its values are bound by name."""
    conditions: list[ColumnElement[bool]] = [
        Conversation.user_id == bindparam("list_user", type_=String()),
        Conversation.archived_at.is_(None),
    ]
    if folder:
        conditions.append(Conversation.folder_id == bindparam("list_folder", type_=String()))
    if cursor:
        conditions.append(
            tuple_(Conversation.pinned, Conversation.last_active_at, Conversation.id)
            < tuple_(
                bindparam("cursor_pinned", type_=Boolean()),
                bindparam("cursor_when", type_=UTCDateTime()),
                bindparam("cursor_id", type_=String()),
            )
        )
    entity: Any = Conversation
    stmt: Select[Any] = select(Conversation).where(*conditions)
    if search is not None:
        entity, stmt = search_source(search, conditions)
    stmt = stmt.order_by(
        entity.pinned.desc(), entity.last_active_at.desc(), entity.id.desc()
    ).limit(bindparam("list_limit", type_=Integer()))
    if offset:
        stmt = stmt.offset(bindparam("list_offset", type_=BigInteger()))
    # The record's columns, not ORM objects: a page is read once and handed out frozen.
    record_columns = [getattr(entity, field.name) for field in dataclass_fields(ConversationRecord)]
    return stmt.with_only_columns(*record_columns, maintain_column_froms=True)


def list_conversations(
    session: Session,
    user: Account,
    *,
    limit: int = DEFAULT_PAGE,
    cursor: str | None = None,
    offset: int | None = None,
    q: str | None = None,
    folder_id: str | None = None,
) -> Page:
    """Unarchived conversations, pinned first, then most recently active; ``q`` matches the
    title or any message's content (STORE-7)."""
    if not 1 <= limit <= MAX_PAGE:
        raise InvalidInput(f"limit: between 1 and {MAX_PAGE}")
    if offset is not None and offset < 0:
        raise InvalidInput("offset: must not be negative")
    values: dict[str, Any] = {"list_user": user.id, "list_limit": limit + 1}
    if folder_id is not None:
        owned_folder(session, user, folder_id)
        values["list_folder"] = folder_id
    if cursor:
        values["cursor_pinned"], values["cursor_when"], values["cursor_id"] = decode_cursor(cursor)
    if offset:
        values["list_offset"] = offset
    search = None
    if q is not None and q.strip():  # STORE-7: from the full-text indexes
        found = search_values(session, q)
        if found is None:
            return Page([], None)
        values.update(found)
        search = session.get_bind().dialect.name
    stmt = _list_statement(search, folder_id is not None, bool(cursor), bool(offset))
    rows = [ConversationRecord(*row) for row in session.execute(stmt, values)]
    more = len(rows) > limit
    rows = rows[:limit]
    return Page(rows, encode_cursor(rows[-1]) if more and rows else None)
