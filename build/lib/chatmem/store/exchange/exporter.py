"""Stored rows → the ``chatmem.export/1`` document (STORE-5), lazily.

:func:`exported_conversation` builds the head of one conversation (title, folder by name,
pin, mode, non-secret profile settings, summaries) and hands messages over as a generator
that pages through ``(conversation_id, seq)`` with plain Core rows, so exporting a huge
conversation never loads it whole and never fills the ORM identity map.  The session must
stay open while the chunks are consumed.

Profile settings come from the linked profile, else from the settings an earlier import
brought (``conversations.meta["profile"]``).  Only the four
engine knobs are ever written — never names, endpoints or API keys.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from chatmem.context.values import default_answer_reserve
from chatmem.errors import NotFound
from chatmem.formats.native import ExportedConversation, export_chunks
from chatmem.formats.records import PROFILE_KEYS, format_time
from chatmem.store import projects
from chatmem.store.accounts import Account
from chatmem.store.tables.conversations import (
    TOKEN_COLUMNS,
    Conversation,
    File,
    Folder,
    Message,
    MessageVersion,
    Summary,
)
from chatmem.store.tables.pinned_facts import PinnedFactRow
from chatmem.store.tables.profiles import ModelProfile

PAGE = 1_000


# Reads an archived conversation whole: (user id, conversation id) -> its export object.
ArchivedReader = Callable[[str, str], dict[str, Any]]


def export_conversation_ids(
    session: Session,
    user: Account,
    conversation_id: str | None = None,
    *,
    include_archived: bool = True,
) -> list[str]:
    """The user's conversations to export, oldest first; a foreign id is NotFound."""
    stmt = select(Conversation.id).where(Conversation.user_id == user.id)
    if not include_archived:
        stmt = stmt.where(Conversation.archived_at.is_(None))
    if conversation_id is not None:
        found = session.scalar(stmt.where(Conversation.id == conversation_id))
        if found is None:
            raise NotFound("conversation")
        return [found]
    return list(session.scalars(stmt.order_by(Conversation.created_at, Conversation.id)))


def export_stream(
    session: Session,
    conversation_ids: list[str],
    *,
    now: datetime | None = None,
    with_tokens: bool = False,
    archived: ArchivedReader | None = None,
) -> Iterator[bytes]:
    """The whole document as byte chunks; conversations are read one at a time.
    ``with_tokens`` adds each message's cached counts, ``seq`` and ``meta`` (archives: a
    restore puts them back as they were; an import of a user's file always recounts).
    Archived conversations are read through ``archived`` (checked against their hash) and
    carry ``"archived": true``; without a reader they are left out."""
    stamp = format_time(now or datetime.now(UTC))

    def conversations() -> Iterator[ExportedConversation]:
        for cid in conversation_ids:
            conversation = session.get(Conversation, cid)
            if conversation is None:  # deleted while the download ran
                continue
            if conversation.archived_at is not None:
                if archived is not None:
                    yield _from_archive(archived(conversation.user_id, conversation.id))
                session.expunge(conversation)
                continue
            yield exported_conversation(session, conversation, with_tokens=with_tokens)
            session.expunge(conversation)

    return export_chunks(conversations(), exported_at=stamp)


def _from_archive(item: dict[str, Any]) -> ExportedConversation:
    messages = item.pop("messages", [])
    files = item.pop("files", [])
    return ExportedConversation(head={**item, "archived": True}, messages=messages, files=files)


def exported_conversation(
    session: Session, conversation: Conversation, *, with_tokens: bool = False
) -> ExportedConversation:
    head: dict[str, Any] = {
        "id": conversation.id,
        "title": conversation.title,
        "folder": _folder_name(session, conversation.folder_id),
        "pinned": bool(conversation.pinned),
        "mode": conversation.mode,
        "profile": profile_settings(session, conversation),
    }
    summaries = summaries_of(session, conversation.id)
    head["summary"] = (
        {"text": summaries[-1]["text"], "through": summaries[-1]["through"]} if summaries else None
    )
    head["summaries"] = summaries
    if conversation.instructions:
        head["instructions"] = conversation.instructions
    if conversation.recall is not None:  # issue 17: the recall switch, when set
        head["recall"] = conversation.recall
    head["created_at"] = format_time(conversation.created_at)
    head["updated_at"] = format_time(conversation.updated_at)
    if conversation.has_pinned_facts:  # CTX-24: the pinned facts, oldest first
        head["facts"] = facts_of(session, conversation.id)
    kept = versions_of(session, conversation.id)
    if kept:
        head["versions"] = kept
    if conversation.project_id is not None:  # PROJ-1: the project travels with it
        project = projects.exported_project(session, conversation.project_id, conversation.id)
        if project is not None:
            head["project"] = project
    return ExportedConversation(
        head=head,
        messages=messages_of(session, conversation.id, with_tokens=with_tokens),
        files=files_of(session, conversation.id),
    )


def facts_of(session: Session, conversation_id: str) -> list[dict[str, Any]]:
    """CTX-24: the conversation's pinned facts as the export format writes them (no ids:
    nothing in the file points at a fact, and an import gives them new ones)."""
    rows = session.execute(
        select(PinnedFactRow.text, PinnedFactRow.message_id, PinnedFactRow.created_at)
        .where(PinnedFactRow.conversation_id == conversation_id)
        .order_by(PinnedFactRow.created_at, PinnedFactRow.id)
    )
    return [
        {"text": r.text, "message_id": r.message_id, "created_at": format_time(r.created_at)}
        for r in rows
    ]


def _folder_name(session: Session, folder_id: str | None) -> str | None:
    if folder_id is None:
        return None
    return session.scalar(select(Folder.name).where(Folder.id == folder_id))


def messages_of(
    session: Session, conversation_id: str, *, with_tokens: bool = False
) -> Iterator[dict[str, Any]]:
    """Messages in ``seq`` order, one page of Core rows at a time."""
    token_columns = (
        [*(getattr(Message, c) for c in TOKEN_COLUMNS.values()), Message.meta]
        if with_tokens
        else []
    )
    columns = (
        Message.seq,
        Message.id,
        Message.role,
        Message.content,
        Message.excluded,
        Message.created_at,
        Message.tool_calls,
        Message.tool_call_id,
        Message.hidden,
        # A reasoning model's thinking (meta.reasoning): read alone, not the whole meta.
        Message.meta["reasoning"].as_string().label("reasoning"),
        *token_columns,
    )
    after = 0
    while True:
        rows = session.execute(
            select(*columns)
            .where(Message.conversation_id == conversation_id, Message.seq > after)
            .order_by(Message.seq)
            .limit(PAGE)
        ).all()
        for row in rows:
            item: dict[str, Any] = {
                "id": row.id,
                "role": row.role,
                "content": row.content,
                "excluded": bool(row.excluded),
                "created_at": format_time(row.created_at),
            }
            if row.tool_calls:
                item["tool_calls"] = [
                    {
                        "id": c.get("id"),
                        "name": c.get("name"),
                        "arguments": c.get("arguments", "{}"),
                    }
                    for c in row.tool_calls
                ]
            if row.tool_call_id:
                item["tool_call_id"] = row.tool_call_id
            if row.hidden:  # PROJ-3: a version not shown (never planned)
                item["hidden"] = True
            if row.reasoning:
                item["reasoning"] = row.reasoning
            if with_tokens:  # archive-only extras, restored as they were
                item["tokens"] = {c: getattr(row, c) for c in TOKEN_COLUMNS.values()}
                item["seq"] = row.seq
                if row.meta:
                    item["meta"] = row.meta
            yield item
        if len(rows) < PAGE:
            return
        after = rows[-1].seq


def versions_of(session: Session, conversation_id: str) -> list[dict[str, Any]]:
    """PROJ-3: the versions of answers and questions, and which one each slot shows."""
    return [
        {
            "kind": row.kind,
            "slot": row.slot,
            "number": row.number,
            "shown": bool(row.shown),
            "message_ids": list(row.message_ids),
        }
        for row in session.execute(
            select(MessageVersion)
            .where(MessageVersion.conversation_id == conversation_id)
            .order_by(MessageVersion.kind, MessageVersion.slot, MessageVersion.number)
        ).scalars()
    ]


def summaries_of(session: Session, conversation_id: str) -> list[dict[str, Any]]:
    rows = session.execute(
        select(Summary).where(Summary.conversation_id == conversation_id).order_by(Summary.version)
    ).scalars()
    out = []
    for row in rows:
        item: dict[str, Any] = {
            "text": row.text,
            "through": row.through_message_id,
            "version": row.version,
            "focus": row.focus,
            "created_at": format_time(row.created_at),
        }
        if row.model:
            item["model"] = row.model
        if row.cost:
            item["cost"] = row.cost
        out.append(item)
        session.expunge(row)
    return out


def files_of(session: Session, conversation_id: str) -> Iterator[dict[str, Any]]:
    rows = session.execute(
        select(
            File.id,
            File.name,
            File.content,
            File.message_id,
            File.state,
            File.created_at,
            File.mime,
            File.data,
        )
        .where(File.conversation_id == conversation_id)
        .order_by(File.created_at, File.id)
    ).all()
    for row in rows:
        item = {
            "id": row.id,
            "name": row.name,
            "content": row.content,
            "message_id": row.message_id,
            "state": row.state,
            "created_at": format_time(row.created_at),
        }
        if row.data is not None:  # a binary attachment (PROV-4)
            item["mime"] = row.mime
            item["data_base64"] = base64.b64encode(row.data).decode("ascii")
        yield item


def profile_settings(session: Session, conversation: Conversation) -> dict[str, Any] | None:
    """The four non-secret engine knobs of the conversation's profile, or None.  A linked
    profile (own or shared) wins; else the settings an earlier import brought along."""
    if conversation.profile_id:
        row = session.execute(
            select(
                ModelProfile.context_window,
                ModelProfile.answer_reserve,
                ModelProfile.tokenizer,
                ModelProfile.stateless,
            ).where(ModelProfile.id == conversation.profile_id)
        ).first()
        if row is not None:
            settings = dict(row._mapping)
            if settings["answer_reserve"] is None:  # automatic: the reserve it plans with
                settings["answer_reserve"] = default_answer_reserve(settings["context_window"])
            return {k: v for k, v in settings.items() if v is not None}
    meta = conversation.meta or {}
    kept = meta.get("profile") if isinstance(meta, dict) else None
    return {k: kept[k] for k in PROFILE_KEYS if k in kept} if isinstance(kept, dict) else None
