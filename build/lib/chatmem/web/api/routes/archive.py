"""The archive (ARCH-1, ARCH-2): archive a conversation, list / search archived ones by
title, read one without changing it, restore it, delete it for good.

Every id is scoped to its owner: a foreign id, a missing id and (for the ``/archive/{id}``
routes) a live conversation's id all answer 404 ``not_found`` (STORE-1).  The work happens
in :class:`chatmem.store.archive.Archiver`, which runs its own short transactions around the
file writes in the careful order ARCH-2 needs.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Response

from chatmem.bounds import MAX_INT
from chatmem.store import conversations as store
from chatmem.store.archive import MAX_PAGE, Archiver
from chatmem.store.quotas import Limits
from chatmem.web.api.schemas import WholeNumber
from chatmem.web.deps import CurrentUser, DatabaseDep, DbSession, SettingsDep
from chatmem.web.views.conversations import conversation_public

router = APIRouter(prefix="/api/v1", tags=["archive"])


def get_archiver(
    settings: SettingsDep, db: DatabaseDep, session: DbSession, user: CurrentUser
) -> Archiver:
    # The request's own unit of work only authenticated the caller; end it so the archiver's
    # short transactions (around file writes) never wait on it — on SQLite a writing
    # request holds the write lock from its first statement.
    session.commit()
    return Archiver.from_settings(settings, db)


ArchiverDep = Annotated[Archiver, Depends(get_archiver)]


@router.post("/conversations/{conversation_id}/archive")
def archive_conversation(
    conversation_id: str, user: CurrentUser, archiver: ArchiverDep
) -> dict[str, Any]:
    return archiver.archive(user.id, conversation_id).as_json()


@router.get("/archive")
def list_archive(
    user: CurrentUser,
    archiver: ArchiverDep,
    q: str | None = Query(None, max_length=500),
    limit: WholeNumber = Query(50, ge=1, le=MAX_PAGE),
    offset: WholeNumber = Query(0, ge=0, le=MAX_INT),
) -> dict[str, Any]:
    items, total = archiver.search(user.id, q, limit=limit, offset=offset)
    following = offset + len(items)
    return {
        "items": [item.as_json() for item in items],
        "total": total,
        "next_offset": following if following < total else None,
    }


@router.get("/archive/{conversation_id}")
def read_archived(conversation_id: str, user: CurrentUser, archiver: ArchiverDep) -> dict[str, Any]:
    return archiver.read(user.id, conversation_id)


@router.post("/archive/{conversation_id}/restore")
def restore_archived(
    conversation_id: str,
    user: CurrentUser,
    archiver: ArchiverDep,
    db: DatabaseDep,
    settings: SettingsDep,
) -> dict[str, Any]:
    # Only an archived conversation can be restored through this route (a live id is 404).
    archiver.require_archived(user.id, conversation_id)
    archiver.restore(user.id, conversation_id, limits=Limits.from_settings(settings))
    with db.session() as session:  # a fresh transaction sees the restored rows
        conversation = store.owned_conversation(session, user, conversation_id)
        return conversation_public(
            conversation, message_count=store.message_count(session, conversation.id)
        )


@router.delete("/archive/{conversation_id}", status_code=204)
def delete_archived(conversation_id: str, user: CurrentUser, archiver: ArchiverDep) -> Response:
    archiver.delete(user.id, conversation_id)
    return Response(status_code=204)
