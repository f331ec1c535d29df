"""Request bodies shared by the storage routes, and the JSON shape of stored objects.

Bodies are strict (``extra="forbid"``, no type coercion): a wrong type or an unknown field is
``invalid_input`` rather than a guess.  Responses use snake_case, string ids and ISO-8601 UTC
times with ``Z``.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from chatmem.bounds import MAX_INT
from chatmem.store.accounts import Account
from chatmem.store.conversations import ConversationRecord, FolderRecord
from chatmem.store.files import FileRecord
from chatmem.store.messages import MessageRecord
from chatmem.store.summaries import SummaryRecord, is_edited
from chatmem.store.tables.conversations import Conversation, File, Folder, Message
from chatmem.store.types import INTEGER_MAX, iso


class Body(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


def _whole_text(value: Any) -> Any:
    """A query value is text: ``5`` is a whole number, ``5.0`` or ``1e3`` is not."""
    if isinstance(value, str) and not re.fullmatch(r"[+-]?[0-9]+", value.strip()):
        raise ValueError("Input should be a whole number")
    return value


#: Marks a query or header integer as whole-number text; bounds go *before* it
#: (``Annotated[int, Field(ge=1, le=500), Whole]``), so /openapi.json states them as JSON
#: Schema's ``minimum``/``maximum`` — after it, pydantic writes keys no client knows
#: (``ge``/``le``), and the fuzzer never tries a column's edge.
Whole = BeforeValidator(_whole_text)

#: A whole-number query parameter, as strict as a body's integers (the fuzzer checks it).
WholeNumber = Annotated[int, Whole]

#: A sequence number a client pages or resumes from — a message's place in its conversation
#: (``?after_seq=``) or an event's in its run (``?after=``, ``Last-Event-ID``).  Both columns
#: are ``Integer``, 32 bits on PostgreSQL, which refuses a larger value in the statement
#: itself (a 500): the range is checked here, the same on every backend.
Seq = Annotated[int, Field(ge=0, le=INTEGER_MAX), Whole]
#: A row offset: PostgreSQL's OFFSET and SQLite's take 64 bits.
Offset = Annotated[int, Field(ge=0, le=MAX_INT), Whole]


def user_public(user: Account) -> dict[str, Any]:
    return {
        "id": user.id,
        "name": user.name,
        "is_admin": user.is_admin,
        "created_at": iso(user.created_at),
        "evicted": evicted_public(user),
        "locale": user.locale,
    }


def evicted_public(user: Account) -> dict[str, int]:
    return {"conversations": user.evicted_conversations, "messages": user.evicted_messages}


def folder_public(folder: Folder | FolderRecord) -> dict[str, Any]:
    return {"id": folder.id, "name": folder.name, "created_at": iso(folder.created_at)}


def conversation_public(
    conversation: Conversation | ConversationRecord, **extra: Any
) -> dict[str, Any]:
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


def message_public(
    message: Message | MessageRecord, tokens_column: str, status: str | None
) -> dict[str, Any]:
    return {
        "id": message.id,
        "seq": message.seq,
        "role": message.role,
        "content": message.content,
        "created_at": iso(message.created_at),
        "tokens": getattr(message, tokens_column),
        "excluded": message.excluded,
        "tool_calls": message.tool_calls or [],
        "tool_call_id": message.tool_call_id,
        "status": status,
        # USE-4: the profile that answered (with the feed's note when it is not the chosen).
        "answered_by": (message.meta or {}).get("answered_by"),
        # What a reasoning model thought before this answer (shown, never sent back).
        "reasoning": (message.meta or {}).get("reasoning"),
        # An answer cut short: "length" (the model's output limit), "content_filter".
        "finish_reason": (message.meta or {}).get("finish_reason"),
        # APPS-3: a question an app sent (``ui/message``): {"tool_call_id", "tool"}.
        "from_app": (message.meta or {}).get("from_app"),
    }


def summary_public(summary: SummaryRecord, tokens_column: str) -> dict[str, Any]:
    return {
        "id": summary.id,
        "version": summary.version,
        "text": summary.text,
        "first_message_id": summary.first_message_id,
        "through": summary.through_message_id,
        "message_count": summary.message_count,
        "focus": summary.focus,
        "cost": summary.cost,
        "tokens": getattr(summary, tokens_column),
        "created_at": iso(summary.created_at),
        "edited": is_edited(summary),  # CTX-23: a version the user wrote
    }


def file_public(
    file: File | FileRecord,
    tokens_column: str = "tokens_estimate",
    status: str | None = None,
    *,
    content: bool = False,
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": file.id,
        "conversation_id": file.conversation_id,
        "message_id": file.message_id,
        "name": file.name,
        "state": file.state,
        "size": file.size,
        "tokens": getattr(file, tokens_column),
        "created_at": iso(file.created_at),
        # PROV-4: a binary attachment's media type (null for text); its bytes are at
        # ``content_url``, for the owner only.
        "mime": file.mime,
        "content_url": f"/api/v1/files/{file.id}/content",
        # PROJ-2: an image's size in pixels (null for anything else).
        "width": file.width,
        "height": file.height,
    }
    if status is not None:
        body["status"] = status
    if content:
        body["content"] = file.content
    return body
