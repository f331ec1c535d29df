"""Uploads are received whole before their request takes the write slot.

A writing request takes the server's write slot (``Database.writers``: one at a time on
SQLite) and a transaction when its ``DbSession`` dependency runs.  A route that read its body
after that held the slot for as long as the client took to send it: a body sent at a byte a
second held every other user's writes (and sign-ins) for as long as it lasted.

An upload route therefore declares :data:`ReceivedUpload` *before* any dependency that writes
— FastAPI solves a route's dependencies one after the other, in the order of its parameters.
It authenticates the caller with a short read (401/403 before a byte of the body is taken),
then receives the whole body — capped by the body-limit middleware, spooled to a temporary
file past :data:`SPOOL_IN_MEMORY` — within ``upload_timeout_seconds`` (else 408
``request_timeout``), holding no slot, no transaction and no thread meanwhile.  The route then
reads what arrived: the raw body, or a multipart form parsed from the spool.
"""

from __future__ import annotations

import tempfile
from collections.abc import AsyncIterator
from typing import IO, Annotated

import anyio
from fastapi import Depends, Request
from starlette.datastructures import FormData, UploadFile
from starlette.types import Message

from chatmem.errors import ImportFormatError, UploadTimedOut
from chatmem.store.accounts import UserRecord
from chatmem.web.deps import SettingsDep, get_current_user

#: Bodies up to this size stay in memory; larger ones go to a temporary file.
SPOOL_IN_MEMORY = 8 * 1024 * 1024
_CHUNK = 64 * 1024


class Upload:
    """A request body received whole, and the user who sent it."""

    def __init__(self, request: Request, user: UserRecord, spool: IO[bytes]) -> None:
        self.user = user
        self._request = request
        self._spool = spool
        self._forms: list[FormData] = []

    @property
    def size(self) -> int:
        self._spool.seek(0, 2)
        return self._spool.tell()

    @property
    def file(self) -> IO[bytes]:
        """The raw body, from its start."""
        self._spool.seek(0)
        return self._spool

    def body(self) -> bytes:
        return self.file.read()

    async def form(self, *, max_files: int = 1000, max_fields: int = 1000) -> FormData:
        """The body parsed as a form (multipart or urlencoded), as ``Request.form`` would."""
        size, spool = self.size, self.file

        async def replay() -> Message:
            chunk = spool.read(_CHUNK)
            return {"type": "http.request", "body": chunk, "more_body": spool.tell() < size}

        form = await Request(self._request.scope, replay).form(
            max_files=max_files, max_fields=max_fields
        )
        self._forms.append(form)
        return form

    async def the_file(self) -> IO[bytes]:
        """An import's file: the one file of a multipart form, or else the raw body."""
        if not self._request.headers.get("content-type", "").startswith("multipart/form-data"):
            return self.file
        form = await self.form(max_files=1, max_fields=10)
        uploads = [v for v in form.values() if isinstance(v, UploadFile)]
        if not uploads:
            raise ImportFormatError("Send the export as the request body or as a multipart file.")
        uploads[0].file.seek(0)
        return uploads[0].file

    async def aclose(self) -> None:
        for form in self._forms:
            await form.close()
        self._spool.close()


def _caller(request: Request) -> UserRecord:
    """The signed-in user, as ``CurrentUser`` checks them, in a read session: a read takes
    neither the write slot nor SQLite's write lock."""
    with request.app.state.db.session() as session:
        return get_current_user(request, session)


async def receive_upload(request: Request, settings: SettingsDep) -> AsyncIterator[Upload]:
    """The caller authenticated, then the whole body received (see the module docstring)."""
    user = await anyio.to_thread.run_sync(_caller, request)
    spool = tempfile.SpooledTemporaryFile(max_size=SPOOL_IN_MEMORY)  # noqa: SIM115
    upload = Upload(request, user, spool)
    try:
        seconds = settings.upload_timeout_seconds
        try:
            with anyio.fail_after(seconds):
                async for chunk in request.stream():
                    spool.write(chunk)
        except TimeoutError:
            raise UploadTimedOut(
                f"The upload did not arrive whole within {seconds:g} seconds, so nothing was "
                "changed; send it again over a faster connection."
            ) from None
        yield upload
    finally:
        await upload.aclose()


#: Declare it before ``CurrentUser`` and ``DbSession``: the body is received before the
#: request takes the write slot.
ReceivedUpload = Annotated[Upload, Depends(receive_upload)]
