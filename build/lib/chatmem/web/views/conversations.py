"""The JSON of folders and conversations (STORE-2): snake_case, string ids, ISO-8601 UTC
times with ``Z``."""

from __future__ import annotations

from typing import Any

from chatmem.store.conversations import ConversationRecord, FolderRecord
from chatmem.store.types import iso


def folder_public(folder: FolderRecord) -> dict[str, Any]:
    return {"id": folder.id, "name": folder.name, "created_at": iso(folder.created_at)}


def conversation_public(conversation: ConversationRecord, **extra: Any) -> dict[str, Any]:
    return {
        "id": conversation.id,
        "title": conversation.title,
        "folder_id": conversation.folder_id,
        "pinned": conversation.pinned,
        "mode": conversation.mode,
        "profile_id": conversation.profile_id,
        "instructions": conversation.instructions,
        "created_at": iso(conversation.created_at),
        "updated_at": iso(conversation.updated_at),
        "last_active_at": iso(conversation.last_active_at),
        "archived": conversation.archived_at is not None,
        # CTX-23: the conversation this one was continued from, if any.
        "source_conversation_id": conversation.source_conversation_id,
        # Issue 17: the recall switch as set (null: the profile's, else the mode's default).
        "recall": conversation.recall,
        # PROJ-1: the project whose instructions and files go with every request.
        "project_id": conversation.project_id,
        **extra,
    }
