"""Files (CTX-16): upload to a conversation (multipart or JSON), read, change state; the raw
content of a file, text or a tool's binary attachment (PROV-4), for its owner only."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from fastapi import APIRouter, Request, Response
from pydantic import ValidationError
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import UploadFile

from chatmem.bounds import check_value
from chatmem.errors import InvalidInput
from chatmem.formats.images import is_image
from chatmem.store import conversations as store
from chatmem.store import files as store_files
from chatmem.store import images as store_images
from chatmem.web.api.schemas import Body
from chatmem.web.deps import CurrentUser, DbSession, SettingsDep
from chatmem.web.errors import UPLOAD_RESPONSES
from chatmem.web.uploads import ReceivedUpload, Upload
from chatmem.web.views.files import file_public

router = APIRouter(tags=["files"])


class FileCreate(Body):
    name: str
    content: str
    message_id: str | None = None
    state: str = "auto"


class FileUpdate(Body):
    state: str


@dataclass(frozen=True)
class ImageUpload:
    """PROJ-2: an uploaded image (its bytes are checked when stored)."""

    name: str | None
    data: bytes
    message_id: str | None


async def _upload(request: Request, received: Upload) -> FileCreate | ImageUpload:
    """The upload as a :class:`FileCreate`, from multipart form data or a JSON body; an
    image (by its bytes or its declared type) as an :class:`ImageUpload`."""
    kind = request.headers.get("content-type", "")
    try:
        if kind.startswith("multipart/form-data"):
            form = await received.form()
            upload = form.get("file")
            if not isinstance(upload, UploadFile):
                raise InvalidInput("file: missing (send the file in a form field named 'file')")
            raw = await upload.read()
            if is_image(raw, upload.content_type):
                message_id = form.get("message_id")
                return ImageUpload(
                    upload.filename, raw, message_id if isinstance(message_id, str) else None
                )
            try:
                content = raw.decode("utf-8")
            except UnicodeDecodeError:
                raise InvalidInput("Only UTF-8 text files can be attached.") from None
            fields: dict[str, Any] = {"name": upload.filename or "file.txt", "content": content}
            for key in ("message_id", "state"):
                value = form.get(key)
                if isinstance(value, str):
                    fields[key] = value
            check_value(fields)  # SEC-1: no NUL, valid Unicode (JSON bodies: the middleware)
            return FileCreate(**fields)
        return FileCreate.model_validate_json(received.body())
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ()))
        raise InvalidInput(
            f"{where}: {first.get('msg', 'invalid')}" if where else "invalid body"
        ) from None
    except json.JSONDecodeError:
        raise InvalidInput("The body is not valid JSON.") from None


# The body is read by hand (two content types), so /openapi.json is told what it is.
_UPLOAD_BODY = {
    "requestBody": {
        "required": True,
        "content": {
            "application/json": {"schema": FileCreate.model_json_schema()},
            "multipart/form-data": {
                "schema": {
                    "type": "object",
                    "required": ["file"],
                    "properties": {
                        "file": {"type": "string", "format": "binary"},
                        "message_id": {"type": "string"},
                        "state": {"type": "string", "enum": ["auto", "pinned", "excluded"]},
                    },
                }
            },
        },
    }
}


@router.post(
    "/api/v1/conversations/{conversation_id}/files",
    status_code=201,
    openapi_extra=_UPLOAD_BODY,
    responses=UPLOAD_RESPONSES,
)
async def upload_file(
    conversation_id: str,
    request: Request,
    received: ReceivedUpload,  # before the write slot (CurrentUser, DbSession) is taken
    user: CurrentUser,
    session: DbSession,
    settings: SettingsDep,
) -> dict[str, Any]:
    body = await _upload(request, received)

    def store_upload() -> dict[str, Any]:  # database work off the event loop
        if isinstance(body, ImageUpload):  # PROJ-2: checked by its bytes, stored as a blob
            image = store_images.add_image(
                session,
                user_id=user.id,
                conversation_id=conversation_id,
                message_id=body.message_id,
                filename=body.name,
                data=body.data,
                max_bytes=settings.max_image_bytes,
            )
            return file_public(store_files.owned_file(session, user, image.id))
        conversation = store.owned_conversation(session, user, conversation_id)
        row = store_files.add_file(
            session,
            conversation,
            body.name,
            body.content,
            message_id=body.message_id,
            state=body.state,
        )
        return file_public(row)

    return await run_in_threadpool(store_upload)


@router.get("/api/v1/files/{file_id}")
def read_file(file_id: str, user: CurrentUser, session: DbSession) -> dict[str, Any]:
    return file_public(store_files.owned_file(session, user, file_id), content=True)


#: Media types a browser may show inline; anything else (HTML, SVG, scripts…) is served as a
#: download, so a tool's output never runs in chatmem's origin.
INLINE_TYPES = frozenset(
    {"image/png", "image/jpeg", "image/gif", "image/webp", "image/avif", "image/bmp"}
    | {"audio/mpeg", "audio/wav", "audio/ogg", "audio/webm", "text/plain"}
)


@router.get("/api/v1/files/{file_id}/content")
def file_content(file_id: str, user: CurrentUser, session: DbSession) -> Response:
    """The file's bytes: a binary attachment as stored with its media type, a text file as
    UTF-8 text.  404 for anyone but the conversation's owner (STORE-1)."""
    row, data = store_files.owned_file_data(session, user, file_id)
    if data is not None:
        body, mime = data, (row.mime or "application/octet-stream").lower()
    else:
        body, mime = row.content.encode("utf-8"), "text/plain"
    base = mime.split(";", 1)[0].strip()
    inline = base in INLINE_TYPES
    name = "".join(c if c.isalnum() or c in "._-" else "_" for c in row.name)[:200] or "file"
    media_type = base if inline else "application/octet-stream"
    if base == "text/plain":
        media_type = "text/plain; charset=utf-8"
    return Response(
        body,
        media_type=media_type,
        headers={
            "Content-Disposition": f'{"inline" if inline else "attachment"}; filename="{name}"',
            "X-Content-Type-Options": "nosniff",
            "Content-Security-Policy": "default-src 'none'; sandbox",
            "Cache-Control": "private, no-store",
        },
    )


@router.patch("/api/v1/files/{file_id}")
def change_file_state(
    file_id: str, body: FileUpdate, user: CurrentUser, session: DbSession
) -> dict[str, Any]:
    return file_public(store_files.set_file_state(session, user, file_id, body.state))
