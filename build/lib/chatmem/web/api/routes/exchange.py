"""``GET /api/v1/export`` and ``POST /api/v1/import`` (STORE-5).

Export streams the ``chatmem.export/1`` document as it is produced (its own database session
lives as long as the download); archived conversations are included, read from their
archive and marked ``"archived": true``, and an import archives them again.

Import takes the file as the raw request body or as the one file of a multipart form.  The
body is received whole first (:mod:`chatmem.web.uploads`: capped at ``max_import_bytes``,
within ``upload_timeout_seconds``), holding no write slot; then the file is parsed and
checked, and written in short units that let other users' writes in between, shown all at
once at the end (:mod:`chatmem.store.exchange.staged`).  Any error — broken JSON, a foreign
format, a quota — answers 422 ``invalid_input`` (or the error's own code) with nothing
changed.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any, TypeVar

import anyio
import anyio.from_thread
from fastapi import APIRouter, Query
from fastapi.responses import StreamingResponse

from chatmem.bounds import Bounds
from chatmem.errors import ImportFormatError
from chatmem.formats.source import ImportSource
from chatmem.store import units
from chatmem.store.archive import Archiver, archive_imported
from chatmem.store.db import Database
from chatmem.store.exchange.exporter import export_conversation_ids, export_stream
from chatmem.store.exchange.staged import run_staged
from chatmem.store.quotas import Limits
from chatmem.store.sessions import Session
from chatmem.web.deps import CurrentUser, DatabaseDep, DbSession, SettingsDep
from chatmem.web.errors import UPLOAD_RESPONSES
from chatmem.web.uploads import ReceivedUpload

router = APIRouter(prefix="/api/v1", tags=["export/import"])

T = TypeVar("T")


@router.get("/export", response_class=StreamingResponse)
def export(
    user: CurrentUser,
    session: DbSession,
    db: DatabaseDep,
    settings: SettingsDep,
    conversation_id: str | None = Query(None, max_length=64),
) -> StreamingResponse:
    ids = export_conversation_ids(session, user, conversation_id)  # 404 before streaming
    archiver = Archiver.from_settings(settings, db)

    def body() -> Iterator[bytes]:
        with db.session() as stream_session:
            yield from export_stream(stream_session, ids, archived=archiver.read)

    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    return StreamingResponse(
        body(),
        media_type="application/json",
        headers={"Content-Disposition": f'attachment; filename="chatmem-export-{stamp}.json"'},
    )


class ServerUnits:
    """Units of an import run from a worker thread: a write waits for the write slot on the
    event loop like any request's, then runs in a worker thread (see ``dbwork``)."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def read(self, fn: Callable[[Session], T], /) -> T:
        with self.db.session() as session:  # a short read takes no slot
            return fn(session)

    def write(self, fn: Callable[[Session], T], /) -> T:
        return anyio.from_thread.run(functools.partial(units.work_in_thread, self.db, fn))


# The upload is streamed by hand, so /openapi.json is told what it is.
_IMPORT_BODY = {
    "requestBody": {
        "required": True,
        "description": "A chatmem export, a ChatGPT, Claude or Open WebUI export, or their ZIP.",
        "content": {
            "application/json": {"schema": {"type": ["object", "array"]}},
            "application/zip": {"schema": {"type": "string", "format": "binary"}},
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


@router.post("/import", openapi_extra=_IMPORT_BODY, responses=UPLOAD_RESPONSES)
async def import_file(
    received: ReceivedUpload, settings: SettingsDep, db: DatabaseDep
) -> dict[str, Any]:
    upload = await received.the_file()
    upload.seek(0, 2)
    if upload.tell() == 0:
        raise ImportFormatError("The request body is empty: send an export file.")
    upload.seek(0)
    source = ImportSource(
        upload,  # type: ignore[arg-type]
        bounds=Bounds.from_settings(settings),
        max_unpacked_bytes=settings.max_import_bytes,
    )
    user_id = received.user.id
    result = await anyio.to_thread.run_sync(
        lambda: run_staged(ServerUnits(db), user_id, source, limits=Limits.from_settings(settings))
    )
    if result.archived_ids:  # archived at the source: archive again once the rows are in
        archiver = Archiver.from_settings(settings, db)
        await anyio.to_thread.run_sync(
            lambda: archive_imported(archiver, user_id, result.archived_ids)
        )
    return result.as_json()
