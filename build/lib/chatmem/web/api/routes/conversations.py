"""``/api/v1/conversations``: the paged list (with search), create, read, change, delete."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query, Response

from chatmem.context.values import Mode
from chatmem.errors import InvalidInput, NotFound
from chatmem.models.profiles import engine_profile_for
from chatmem.store import conversations as store
from chatmem.store.apps import workspace_of
from chatmem.store.profiles import profile_visible
from chatmem.store.quotas import Limits
from chatmem.web.api.schemas import Body, Offset, WholeNumber, evicted_public
from chatmem.web.deps import CurrentUser, DbSession, SettingsDep
from chatmem.web.views.conversations import conversation_public

router = APIRouter(prefix="/api/v1/conversations", tags=["conversations"])


class ConversationCreate(Body):
    title: str = ""
    folder_id: str | None = None
    pinned: bool = False
    mode: Mode = "full"
    profile_id: str | None = None
    instructions: str = ""
    #: Issue 17: the ``recall`` tool; null follows the profile, then the memory mode.
    recall: bool | None = None
    #: PROJ-1: created in this project (its instructions and files go with every request).
    project_id: str | None = None


class ConversationUpdate(Body):
    title: str | None = None
    folder_id: str | None = None
    pinned: bool | None = None
    mode: Mode | None = None
    profile_id: str | None = None
    instructions: str | None = None
    #: Issue 17: true / false, or null to follow the profile and the memory mode again.
    recall: bool | None = None
    #: PROJ-1: moved into this project; null takes it out of its project.
    project_id: str | None = None


def _check_profile(session: DbSession, user: CurrentUser, profile_id: str | None) -> None:
    if profile_id is not None and not profile_visible(session, user.id, profile_id):
        raise NotFound("profile")


@router.get("")
def list_conversations(
    user: CurrentUser,
    session: DbSession,
    limit: WholeNumber = Query(store.DEFAULT_PAGE, ge=1, le=store.MAX_PAGE),
    cursor: str | None = None,
    offset: Offset | None = None,
    q: str | None = Query(None, max_length=500),
    folder_id: str | None = None,
) -> dict[str, Any]:
    page = store.list_conversations(
        session, user, limit=limit, cursor=cursor, offset=offset, q=q, folder_id=folder_id
    )
    return {
        "items": [conversation_public(c) for c in page.items],
        "next_cursor": page.next_cursor,
        "evicted": evicted_public(user),
    }


@router.post("", status_code=201)
def create_conversation(
    body: ConversationCreate, user: CurrentUser, session: DbSession, settings: SettingsDep
) -> dict[str, Any]:
    _check_profile(session, user, body.profile_id)
    conversation = store.create_conversation(
        session, user, Limits.from_settings(settings), **body.model_dump()
    )
    return conversation_public(conversation, message_count=0, workspace=None)


def _workspace(session: DbSession, conversation_id: str) -> dict[str, str] | None:
    """APPS-4: the app the conversation keeps open in its Live Workspace, or None."""
    tool_call_id = workspace_of(session, conversation_id)
    return {"tool_call_id": tool_call_id} if tool_call_id is not None else None


@router.get("/{conversation_id}")
def read_conversation(
    conversation_id: str, user: CurrentUser, session: DbSession
) -> dict[str, Any]:
    conversation = store.owned_conversation(session, user, conversation_id)
    return conversation_public(
        conversation,
        message_count=store.message_count(session, conversation.id),
        workspace=_workspace(session, conversation.id),
    )


@router.patch("/{conversation_id}")
def update_conversation(
    conversation_id: str, body: ConversationUpdate, user: CurrentUser, session: DbSession
) -> dict[str, Any]:
    conversation = store.owned_conversation(session, user, conversation_id)
    changes = {name: getattr(body, name) for name in body.model_fields_set}
    if "profile_id" in changes:
        _check_profile(session, user, changes["profile_id"])
    conversation = store.update_conversation(session, user, conversation, changes)
    if (
        changes.get("mode") not in (None, "off")
        and engine_profile_for(session, conversation).stateless
    ):
        # CTX-7: the request is rolled back with the error, so nothing above sticks.
        raise InvalidInput("This model does not remember previous messages; its mode stays off.")
    return conversation_public(
        conversation,
        message_count=store.message_count(session, conversation.id),
        workspace=_workspace(session, conversation.id),
    )


@router.delete("/{conversation_id}", status_code=204)
def delete_conversation(conversation_id: str, user: CurrentUser, session: DbSession) -> Response:
    store.delete_conversation(session, store.owned_conversation(session, user, conversation_id))
    return Response(status_code=204)
