"""The JSON shapes of projects (PROJ-1), their files, and a conversation's project files
with its own state of each."""

from __future__ import annotations

from typing import Any

from chatmem.store.conversations import ConversationRecord
from chatmem.store.projects import (
    ProjectFileRecord,
    ProjectRecord,
    conversation_count,
    file_states,
    project_files,
)
from chatmem.store.sessions import Session
from chatmem.store.tables.conversations import Conversation
from chatmem.store.types import iso


def file_public(row: ProjectFileRecord, *, content: bool = False) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": row.id,
        "project_id": row.project_id,
        "name": row.name,
        "size": row.size,
        "tokens": row.tokens_estimate,
        "created_at": iso(row.created_at),
    }
    if content:
        body["content"] = row.content
    return body


def project_public(
    session: Session, project: ProjectRecord, *, files: bool = False
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": project.id,
        "name": project.name,
        "instructions": project.instructions,
        "created_at": iso(project.created_at),
        "updated_at": iso(project.updated_at),
        "conversation_count": conversation_count(session, project.id),
    }
    if files:
        body["files"] = [file_public(f) for f in project_files(session, project.id)]
    return body


def conversation_files_public(
    session: Session,
    conversation: Conversation | ConversationRecord,
    tokens_column: str = "tokens_estimate",
    statuses: dict[str, str] | None = None,
) -> list[dict[str, Any]]:
    """The conversation's project files as its file list shows them: with this
    conversation's ``state`` and (given the plan's) ``status`` of each."""
    if conversation.project_id is None:
        return []
    states = file_states(session, conversation.id)
    out = []
    for row in project_files(session, conversation.project_id):
        body = {
            **file_public(row),
            "conversation_id": conversation.id,
            "message_id": None,
            "state": states.get(row.id, "auto"),
            "tokens": getattr(row, tokens_column),
            "mime": None,
        }
        if statuses is not None and row.id in statuses:
            body["status"] = statuses[row.id]
        out.append(body)
    return out
