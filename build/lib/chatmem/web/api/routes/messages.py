"""A conversation's messages: the whole history with memory statuses, appending without a
turn (imports, tests, tools), and excluding / including question–answer pairs (CTX-15)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query
from pydantic import Field

from chatmem.models.profiles import engine_profile_for
from chatmem.store import conversations as store
from chatmem.store import messages as store_messages
from chatmem.store import tool_calls, versions
from chatmem.store.engine import latest_summary
from chatmem.store.files import conversation_files
from chatmem.store.quotas import Limits
from chatmem.turns.memory_status import memory_status
from chatmem.web.api.schemas import Body, Seq, Whole
from chatmem.web.deps import CurrentUser, DbSession, SettingsDep
from chatmem.web.views import projects
from chatmem.web.views.apps import tool_calls_public
from chatmem.web.views.files import file_public
from chatmem.web.views.messages import message_public, summary_public
from chatmem.web.views.versions import failure_public, version_public

router = APIRouter(prefix="/api/v1/conversations/{conversation_id}/messages", tags=["messages"])


class ToolCallBody(Body):
    id: str
    name: str
    arguments: str = "{}"


class MessageCreate(Body):
    role: str
    content: str
    tool_calls: list[ToolCallBody] | None = None
    tool_call_id: str | None = None
    excluded: bool = False


@router.get("")
def list_messages(
    conversation_id: str,
    user: CurrentUser,
    session: DbSession,
    after_seq: Seq | None = None,
    limit: Annotated[int, Field(ge=1, le=10_000), Whole] | None = None,
    hidden: bool = Query(False),
) -> dict[str, Any]:
    """The whole history by default (STORE-2), each message with its status (CTX-14);
    ``after_seq``/``limit`` page through very long conversations.  PROJ-3: each message
    says which version of its slot it is (``version`` of ``versions``); the hidden versions
    are left out unless ``hidden=true`` (then marked ``hidden``, status "hidden"); a
    question whose last turn failed carries that turn's ``error``.  APPS-1: each tool call
    of an answer carries its record (``tool_call_id``) and its ``app``."""
    conversation = store.owned_conversation(session, user, conversation_id)
    profile = engine_profile_for(session, conversation)
    status, file_status, column = memory_status(session, conversation, profile)
    rows = store_messages.history(
        session, conversation.id, after_seq=after_seq, limit=limit, hidden=hidden
    )
    summary = latest_summary(session, conversation.id)
    more = limit is not None and len(rows) == limit
    places = versions.version_map(session, rows)
    failures = versions.failed_turns(session, conversation.id)
    apps = tool_calls.call_apps(session, conversation.id) if any(m.tool_calls for m in rows) else {}
    return {
        "items": [
            {
                **message_public(m, column, "hidden" if m.hidden else status.get(m.id)),
                **version_public(places.get(m.id)),
                "hidden": m.hidden,
                "error": failure_public(failures.get(m.id)) if not m.hidden else None,
                "tool_calls": tool_calls_public(m.id, m.tool_calls or [], apps),
            }
            for m in rows
        ],
        "next_after_seq": rows[-1].seq if more and rows else None,
        "summary": summary_public(summary, column) if summary else None,
        "files": [
            file_public(f, column, file_status.get(f.id))
            for f in conversation_files(session, conversation.id)
        ]
        # PROJ-1: the project's files, with this conversation's state and status of each
        + projects.conversation_files_public(session, conversation, column, file_status),
    }


@router.post("", status_code=201)
def append_message(
    conversation_id: str,
    body: MessageCreate,
    user: CurrentUser,
    session: DbSession,
    settings: SettingsDep,
) -> dict[str, Any]:
    conversation = store.owned_conversation(session, user, conversation_id)
    row = store_messages.append_message(
        session,
        conversation,
        body.role,
        body.content,
        limits=Limits.from_settings(settings),
        tool_calls=[c.model_dump() for c in body.tool_calls or ()],
        tool_call_id=body.tool_call_id,
        excluded=body.excluded,
    )
    return message_public(row, "tokens_estimate", None)


def _exclusion(
    conversation_id: str, message_id: str, user: CurrentUser, session: DbSession, excluded: bool
) -> dict[str, Any]:
    conversation = store.owned_conversation(session, user, conversation_id)
    ids = store_messages.set_pair_excluded(session, conversation, message_id, excluded)
    return {"message_ids": ids, "excluded": excluded}


@router.put("/{message_id}/exclusion")
def exclude_pair(
    conversation_id: str, message_id: str, user: CurrentUser, session: DbSession
) -> dict[str, Any]:
    return _exclusion(conversation_id, message_id, user, session, True)


@router.delete("/{message_id}/exclusion")
def include_pair(
    conversation_id: str, message_id: str, user: CurrentUser, session: DbSession
) -> dict[str, Any]:
    return _exclusion(conversation_id, message_id, user, session, False)
