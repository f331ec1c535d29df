"""``/api/v1/projects`` (PROJ-1): projects with shared instructions and files.

A conversation joins a project with ``project_id`` on create or PATCH
(``/api/v1/conversations``); the project's files are uploaded here and each conversation may
pin or exclude one for itself (``PATCH /api/v1/conversations/{id}/project-files/{file_id}``).
Another user's project answers 404 (STORE-1).
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response
from pydantic import Field
from starlette.concurrency import run_in_threadpool

from chatmem.errors import InvalidInput, NotFound
from chatmem.store import conversations as store_conversations
from chatmem.store import projects as store
from chatmem.store.quotas import Limits
from chatmem.web.api.routes.files import FileUpdate, ImageUpload, _upload
from chatmem.web.api.schemas import Body
from chatmem.web.deps import CurrentUser, DbSession, SettingsDep
from chatmem.web.errors import UPLOAD_RESPONSES
from chatmem.web.uploads import ReceivedUpload
from chatmem.web.views import projects as views
from chatmem.web.views.conversations import conversation_public

router = APIRouter(tags=["projects"])

#: Instructions are sent with every request of every conversation in the project.
MAX_INSTRUCTIONS = 100_000


class ProjectCreate(Body):
    name: str = Field(max_length=store.MAX_PROJECT_NAME)
    instructions: str = Field(default="", max_length=MAX_INSTRUCTIONS)


class ProjectUpdate(Body):
    name: str | None = Field(default=None, max_length=store.MAX_PROJECT_NAME)
    instructions: str | None = Field(default=None, max_length=MAX_INSTRUCTIONS)


@router.get("/api/v1/projects")
def list_projects(user: CurrentUser, session: DbSession) -> dict[str, Any]:
    return {"items": [views.project_public(session, p) for p in store.list_projects(session, user)]}


@router.post("/api/v1/projects", status_code=201)
def create_project(
    body: ProjectCreate, user: CurrentUser, session: DbSession, settings: SettingsDep
) -> dict[str, Any]:
    project = store.create_project(
        session,
        user,
        name=body.name,
        instructions=body.instructions,
        limit=Limits.from_settings(settings).projects,
    )
    return views.project_public(session, project, files=True)


@router.get("/api/v1/projects/{project_id}")
def read_project(project_id: str, user: CurrentUser, session: DbSession) -> dict[str, Any]:
    project = store.owned_project(session, user.id, project_id)
    return views.project_public(session, project, files=True)


@router.patch("/api/v1/projects/{project_id}")
def update_project(
    project_id: str, body: ProjectUpdate, user: CurrentUser, session: DbSession
) -> dict[str, Any]:
    project = store.owned_project(session, user.id, project_id)
    changes = {name: getattr(body, name) for name in body.model_fields_set}
    project = store.update_project(session, project, changes)
    return views.project_public(session, project, files=True)


@router.delete("/api/v1/projects/{project_id}", status_code=204)
def delete_project(project_id: str, user: CurrentUser, session: DbSession) -> Response:
    """The project and its files go; its conversations stay, outside any project."""
    store.delete_project(session, store.owned_project(session, user.id, project_id))
    return Response(status_code=204)


@router.get("/api/v1/projects/{project_id}/conversations")
def project_conversations(project_id: str, user: CurrentUser, session: DbSession) -> dict[str, Any]:
    """The project's live conversations, most recently active first."""
    store.owned_project(session, user.id, project_id)
    return {
        "items": [conversation_public(c) for c in store.project_conversations(session, project_id)]
    }


class ProjectFileCreate(Body):
    name: str
    content: str


# The body is read by hand (two content types), so /openapi.json is told what it is.
_UPLOAD_BODY = {
    "requestBody": {
        "required": True,
        "content": {
            "application/json": {"schema": ProjectFileCreate.model_json_schema()},
            "multipart/form-data": {
                "schema": {
                    "type": "object",
                    "required": ["file"],
                    "properties": {"file": {"type": "string", "format": "binary"}},
                }
            },
        },
    }
}


@router.post(
    "/api/v1/projects/{project_id}/files",
    status_code=201,
    openapi_extra=_UPLOAD_BODY,
    responses=UPLOAD_RESPONSES,
)
async def upload_project_file(
    project_id: str,
    request: Request,
    received: ReceivedUpload,  # before the write slot (CurrentUser, DbSession) is taken
    user: CurrentUser,
    session: DbSession,
) -> dict[str, Any]:
    """A text file shared by every conversation of the project (multipart or JSON
    ``{"name", "content"}``, as conversation files)."""
    body = await _upload(request, received)
    if isinstance(body, ImageUpload):
        raise InvalidInput("A project holds text files; attach images to a message.")
    if body.message_id is not None or body.state != "auto":
        raise InvalidInput("A project file has no message and no state of its own.")

    def store_upload() -> dict[str, Any]:
        project = store.owned_project(session, user.id, project_id)
        row = store.add_project_file(session, project.id, body.name, body.content)
        return views.file_public(row)

    return await run_in_threadpool(store_upload)


@router.get("/api/v1/projects/{project_id}/files/{file_id}")
def read_project_file(
    project_id: str, file_id: str, user: CurrentUser, session: DbSession
) -> dict[str, Any]:
    row = store.owned_project_file(session, user.id, file_id)
    if row.project_id != project_id:
        raise NotFound("file")
    return views.file_public(row, content=True)


@router.delete("/api/v1/projects/{project_id}/files/{file_id}", status_code=204)
def delete_project_file(
    project_id: str, file_id: str, user: CurrentUser, session: DbSession
) -> Response:
    project = store.owned_project(session, user.id, project_id)
    row = store.owned_project_file(session, user.id, file_id)
    if row.project_id != project.id:
        raise NotFound("file")
    store.delete_project_file(session, project, row)
    return Response(status_code=204)


@router.patch("/api/v1/conversations/{conversation_id}/project-files/{file_id}")
def change_project_file_state(
    conversation_id: str, file_id: str, body: FileUpdate, user: CurrentUser, session: DbSession
) -> dict[str, Any]:
    """This conversation's own state for a file of its project: ``pinned`` (always sent),
    ``excluded`` (never), ``auto`` (sent but in ``off``), as for conversation files."""
    conversation = store_conversations.owned_conversation(session, user, conversation_id)
    row = store.owned_project_file(session, user.id, file_id)
    store.set_file_state(session, conversation, row, body.state)
    return {**views.file_public(row), "state": body.state}
