"""OpenAI's Conversations API over chatmem conversations (API-3).

``POST /v1/conversations`` creates a chatmem conversation (in the UI's list like any other)
holding the given ``items``; its ``metadata`` is kept beside it.  ``GET …/{id}`` and
``DELETE …/{id}`` read and delete it (a delete is chatmem's: the conversation and its messages
go, STORE-6).  ``GET …/{id}/items`` lists the conversation as its client sees it, paged like
OpenAI's (``limit``, ``after``, ``order``): each message an item — user, system and assistant
text as ``message`` items, a call of a client's tool as a ``function_call`` item and its
result as a ``function_call_output`` item; the server-side (MCP) calls, a failed answer's
partial text and hidden versions are not shown.  ``POST …/{id}/items`` appends items.
Any chatmem conversation of the user may be named by its id; another user's is not found.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query, Request
from pydantic import Field

from chatmem.errors import InvalidInput
from chatmem.store import conversations as store
from chatmem.store import openai_objects
from chatmem.store.messages import insert_message
from chatmem.store.openai_objects import ItemMessage
from chatmem.store.quotas import Limits
from chatmem.store.sessions import Session
from chatmem.store.units import work
from chatmem.turns.history_match import CLIENT_TOOL, Said
from chatmem.web.api.routes.turns import UserId, turn_service
from chatmem.web.deps import CurrentUser, DbSession, SettingsDep
from chatmem.web.openai_compat.responses_schemas import Metadata, _Open, _take
from chatmem.web.openai_compat.routes import ERRORS

router = APIRouter(prefix="/v1/conversations", tags=["openai-compatible"])


class ConversationCreate(_Open):
    items: list[dict[str, Any]] | None = Field(default=None, max_length=1000)
    metadata: Metadata | None = Field(default=None, max_length=16)


class ItemsCreate(_Open):
    items: list[dict[str, Any]] = Field(min_length=1, max_length=1000)


def _said(items: Sequence[dict[str, Any]]) -> list[Said]:
    said: list[Said] = []
    for index, item in enumerate(items):
        _take(said, item, index, frozenset())
    return said


def _store_said(
    session: Session, user_id: str, conversation_id: str, said: Sequence[Said], limits: Limits
) -> list[str]:
    ids: list[str] = []
    for message in said:
        stored = insert_message(
            session,
            conversation_id,
            message.role,
            message.content,
            user_id=user_id,
            limits=limits,
            tool_calls=message.tool_calls or None,
            tool_call_id=message.tool_call_id,
            meta={CLIENT_TOOL: True} if message.role == "tool" else None,
        )
        if stored is not None:
            ids.append(stored)
    return ids


def _conversation(record: store.ConversationRecord, meta: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": record.id,
        "object": "conversation",
        "created_at": int(record.created_at.timestamp()),
        "metadata": meta,
    }


@router.post("", responses=ERRORS)
def create_conversation(
    body: ConversationCreate, user: CurrentUser, session: DbSession, settings: SettingsDep
) -> dict[str, Any]:
    """A new chatmem conversation holding ``items``."""
    said = _said(body.items or [])
    limits = Limits.from_settings(settings)
    record = store.create_conversation(session, user, limits)
    session.flush()
    _store_said(session, user.id, record.id, said, limits)
    meta = dict(body.metadata or {})
    if meta:
        openai_objects.set_conversation_meta(session, record.id, meta)
    return _conversation(record, meta)


@router.get("/{conversation_id}", responses=ERRORS)
def get_conversation(conversation_id: str, user: CurrentUser, session: DbSession) -> dict[str, Any]:
    """The conversation with its ``metadata`` (any chatmem conversation of the user's)."""
    meta = openai_objects.conversation_meta(session, user.id, conversation_id)
    return _conversation(store.owned_conversation(session, user, conversation_id), meta)


@router.delete("/{conversation_id}", responses=ERRORS)
def delete_conversation(
    conversation_id: str, user: CurrentUser, session: DbSession
) -> dict[str, Any]:
    """Deletes the chatmem conversation and its messages (STORE-6: explicit)."""
    store.delete_conversation(session, store.owned_conversation(session, user, conversation_id))
    return {"id": conversation_id, "object": "conversation.deleted", "deleted": True}


def items_of(messages: Sequence[ItemMessage]) -> list[dict[str, Any]]:
    """The messages as the client sees them, as Conversations API items."""
    server_calls = {
        m.tool_call_id for m in messages if m.role == "tool" and not (m.meta or {}).get(CLIENT_TOOL)
    }
    items: list[dict[str, Any]] = []
    for m in messages:
        meta = m.meta or {}
        if m.role == "tool":
            if m.tool_call_id not in server_calls:
                items.append(
                    {
                        "id": f"fco_{m.id}",
                        "type": "function_call_output",
                        "call_id": m.tool_call_id,
                        "output": m.content,
                        "status": "completed",
                    }
                )
            continue
        if m.role == "assistant" and meta.get("failed"):
            continue
        if m.content or m.role != "assistant":
            kind = "output_text" if m.role == "assistant" else "input_text"
            part: dict[str, Any] = {"type": kind, "text": m.content}
            if kind == "output_text":
                part["annotations"] = []
            items.append(
                {
                    "id": f"msg_{m.id}",
                    "type": "message",
                    "role": m.role,
                    "status": "completed",
                    "content": [part],
                }
            )
        for index, call in enumerate(m.tool_calls):
            if call.id in server_calls:
                continue
            items.append(
                {
                    "id": f"fc_{m.id}_{index}",
                    "type": "function_call",
                    "call_id": call.id,
                    "name": call.name,
                    "arguments": call.arguments,
                    "status": "completed",
                }
            )
    return items


def _page(items: list[dict[str, Any]], limit: int, after: str | None, order: str) -> dict[str, Any]:
    ordered = items if order == "asc" else items[::-1]
    start = 0
    if after is not None:
        ids = [item["id"] for item in ordered]
        if after not in ids:
            raise InvalidInput("after: not an item of this conversation")
        start = ids.index(after) + 1
    page = ordered[start : start + limit]
    return {
        "object": "list",
        "data": page,
        "first_id": page[0]["id"] if page else None,
        "last_id": page[-1]["id"] if page else None,
        "has_more": start + limit < len(ordered),
    }


@router.get("/{conversation_id}/items", responses=ERRORS)
def list_items(
    conversation_id: str,
    user: CurrentUser,
    session: DbSession,
    limit: Annotated[int, Query(ge=1, le=100)] = 20,
    after: Annotated[str | None, Query(max_length=200)] = None,
    order: Literal["asc", "desc"] = "desc",
) -> dict[str, Any]:
    """The conversation's items, newest first unless ``order=asc`` (as OpenAI's)."""
    store.owned_conversation(session, user, conversation_id)
    items = items_of(openai_objects.conversation_messages(session, conversation_id))
    return _page(items, limit, after, order)


@router.post("/{conversation_id}/items", responses=ERRORS)
async def add_items(
    conversation_id: str, body: ItemsCreate, request: Request, user_id: UserId
) -> dict[str, Any]:
    """Appends items to the conversation (refused while a turn runs in it)."""
    said = _said(body.items)
    service = turn_service(request)
    limits = Limits.from_settings(service.settings)

    def append(session: Session) -> list[dict[str, Any]]:
        store.owned_conversation_row(session, user_id, conversation_id)
        ids = set(_store_said(session, user_id, conversation_id, said, limits))
        messages = openai_objects.conversation_messages(session, conversation_id)
        return items_of([m for m in messages if m.id in ids])

    async with service.conversation(user_id, conversation_id, "edit"):
        added = await work(service.db, append)
    return _page(added, max(len(added), 1), None, "asc")
