"""``GET /api/v1/export`` and ``POST /api/v1/import`` (STORE-5).

Export streams the ``chatmem.export/1`` document as it is produced (its own database session
lives as long as the download); archived conversations are included, read from their
archive and marked ``"archived": true``, and an import archives them again.  Import takes the file as the raw request body or as the one
file of a multipart form, spools it to a temporary file (the body-limit middleware caps it at
``max_import_bytes``), and imports it inside the request's unit of work: any error — broken
JSON, a foreign format, a quota — rolls everything back and answers 422 ``invalid_input``
(or the error's own code) with nothing changed.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import IO, Any

import anyio
from fastapi import APIRouter, Query, Request
from fastapi.responses import StreamingResponse
from starlette.datastructures import UploadFile

from chatmem.bounds import Bounds
from chatmem.errors import ImportFormatError
from chatmem.store.archive import Archiver, archive_imported
from chatmem.store.exchange.exporter import export_conversation_ids, export_stream
from chatmem.store.exchange.importer import import_source
from chatmem.store.exchange.source import ImportSource
from chatmem.store.quotas import Limits
from chatmem.web.deps import CurrentUser, DatabaseDep, DbSession, SettingsDep

router = APIRouter(prefix="/api/v1", tags=["export/import"])

_SPOOL_IN_MEMORY = 8 * 1024 * 1024


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


async def _spool(request: Request) -> IO[bytes]:
    """The uploaded file: the multipart file part, or the raw body, on disk past 8 MB."""
    content_type = request.headers.get("content-type", "")
    if content_type.startswith("multipart/form-data"):
        form = await request.form(max_files=1, max_fields=10)
        uploads = [v for v in form.values() if isinstance(v, UploadFile)]
        if not uploads:
            raise ImportFormatError("Send the export as the request body or as a multipart file.")
        return uploads[0].file
    spool = tempfile.SpooledTemporaryFile(max_size=_SPOOL_IN_MEMORY)  # noqa: SIM115
    async for chunk in request.stream():
        spool.write(chunk)
    return spool


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


@router.post("/import", openapi_extra=_IMPORT_BODY)
async def import_file(
    request: Request,
    user: CurrentUser,
    session: DbSession,
    settings: SettingsDep,
    db: DatabaseDep,
) -> dict[str, Any]:
    # End the transaction that authenticated the caller: on SQLite a writing request holds
    # the write lock from its first statement, and receiving a large upload can take long.
    # The import itself then runs in one new transaction of the same session.
    session.commit()
    upload = await _spool(request)
    try:
        upload.seek(0, 2)
        if upload.tell() == 0:
            raise ImportFormatError("The request body is empty: send an export file.")
        source = ImportSource(
            upload,  # type: ignore[arg-type]
            bounds=Bounds.from_settings(settings),
            max_unpacked_bytes=settings.max_import_bytes,
        )
        result = await anyio.to_thread.run_sync(
            lambda: import_source(session, user, source, limits=Limits.from_settings(settings))
        )
    finally:
        upload.close()
    if result.archived_ids:  # archived at the source: archive again once the rows are in
        session.commit()
        archiver = Archiver.from_settings(settings, db)
        await anyio.to_thread.run_sync(
            lambda: archive_imported(archiver, user.id, result.archived_ids)
        )
    return result.as_json()
