"""``/api/v1/folders``: list, create (folder quota, STORE-4), rename, delete."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Response
from pydantic import Field

from chatmem.store import conversations as store
from chatmem.store.quotas import Limits
from chatmem.web.api.schemas import Body
from chatmem.web.deps import CurrentUser, DbSession, SettingsDep
from chatmem.web.views.conversations import folder_public

router = APIRouter(prefix="/api/v1/folders", tags=["folders"])


class FolderBody(Body):
    name: str = Field(min_length=1, max_length=200)  # blank names are refused too


@router.get("")
def list_folders(user: CurrentUser, session: DbSession) -> dict[str, Any]:
    return {"items": [folder_public(f) for f in store.list_folders(session, user)]}


@router.post("", status_code=201)
def create_folder(
    body: FolderBody, user: CurrentUser, session: DbSession, settings: SettingsDep
) -> dict[str, Any]:
    folder = store.create_folder(session, user, body.name, Limits.from_settings(settings))
    return folder_public(folder)


@router.patch("/{folder_id}")
def rename_folder(
    folder_id: str, body: FolderBody, user: CurrentUser, session: DbSession
) -> dict[str, Any]:
    folder = store.owned_folder(session, user, folder_id)
    return folder_public(store.rename_folder(session, folder, body.name))


@router.delete("/{folder_id}", status_code=204)
def delete_folder(folder_id: str, user: CurrentUser, session: DbSession) -> Response:
    store.delete_folder(session, store.owned_folder(session, user, folder_id))
    return Response(status_code=204)
