"""The archive (ARCH-1, ARCH-2): archive a conversation, list / search archived ones by
title, read one without changing it, restore it, delete it for good.

Every id is scoped to its owner: a foreign id, a missing id and (for the ``/archive/{id}``
routes) a live conversation's id all answer 404 ``not_found`` (STORE-1).  The work happens
in :class:`chatmem.store.archive.Archiver`, which runs its own short transactions around the
file writes in the careful order ARCH-2 needs.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query, Response

from chatmem.store import conversations as store
from chatmem.store.archive import MAX_PAGE, Archiver
from chatmem.web.api.schemas import conversation_public
from chatmem.web.deps import CurrentUser, DatabaseDep, SettingsDep

router = APIRouter(prefix="/api/v1", tags=["archive"])


def _archiver(settings: SettingsDep, db: DatabaseDep) -> Archiver:
    return Archiver.from_settings(settings, db)


@router.post("/conversations/{conversation_id}/archive")
def archive_conversation(
    conversation_id: str, user: CurrentUser, settings: SettingsDep, db: DatabaseDep
) -> dict[str, Any]:
    return _archiver(settings, db).archive(user.id, conversation_id).as_json()


@router.get("/archive")
def list_archive(
    user: CurrentUser,
    settings: SettingsDep,
    db: DatabaseDep,
    q: str | None = Query(None, max_length=500),
    limit: int = Query(50, ge=1, le=MAX_PAGE),
    offset: int = Query(0, ge=0),
) -> dict[str, Any]:
    items, total = _archiver(settings, db).search(user.id, q, limit=limit, offset=offset)
    following = offset + len(items)
    return {
        "items": [item.as_json() for item in items],
        "total": total,
        "next_offset": following if following < total else None,
    }


@router.get("/archive/{conversation_id}")
def read_archived(
    conversation_id: str, user: CurrentUser, settings: SettingsDep, db: DatabaseDep
) -> dict[str, Any]:
    return _archiver(settings, db).read(user.id, conversation_id)


@router.post("/archive/{conversation_id}/restore")
def restore_archived(
    conversation_id: str, user: CurrentUser, settings: SettingsDep, db: DatabaseDep
) -> dict[str, Any]:
    archiver = _archiver(settings, db)
    # Only an archived conversation can be restored through this route (a live id is 404).
    archiver.require_archived(user.id, conversation_id)
    archiver.restore(user.id, conversation_id)
    with db.session() as session:  # a fresh transaction sees the restored rows
        conversation = store.owned_conversation(session, user, conversation_id)
        return conversation_public(
            conversation, message_count=store.message_count(session, conversation.id)
        )


@router.delete("/archive/{conversation_id}", status_code=204)
def delete_archived(
    conversation_id: str, user: CurrentUser, settings: SettingsDep, db: DatabaseDep
) -> Response:
    _archiver(settings, db).delete(user.id, conversation_id)
    return Response(status_code=204)
