"""Where import bytes come from: a seekable file (or a ZIP holding ``conversations.json``),
read as a stream with a byte counter for progress bars.

An import reads its input twice — a short sniff of the first items to learn the format, then
the full streamed parse — so a source hands out fresh streams from the start on demand.
ChatGPT and Claude both ship their data export as a ZIP; the member is streamed straight out
of the archive, never extracted to memory.
"""

from __future__ import annotations

import io
import zipfile
from collections.abc import Callable
from pathlib import PurePosixPath
from typing import BinaryIO

from chatmem.errors import ImportFormatError

Progress = Callable[[int, int], None]  # (bytes read so far, total bytes)

_ZIP_MAGIC = b"PK\x03\x04"
_BOM = b"\xef\xbb\xbf"


class CountingReader(io.RawIOBase):
    """A read-only stream that reports how many bytes have passed through it."""

    def __init__(
        self, inner: BinaryIO, total: int, on_progress: Progress | None, *, owns: bool = False
    ) -> None:
        self._inner = inner
        self._owns = owns  # a ZIP member stream is ours to close; the caller's file is not
        self._total = total
        self._on_progress = on_progress
        self.bytes_read = 0
        # Editors on Windows save UTF-8 with a byte-order mark, which JSON parsers refuse.
        head = inner.read(3)
        if head == _BOM:
            self.bytes_read = 3
        else:
            self._pending = head
            return
        self._pending = b""

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        if size == 0:  # a type probe (ijson reads 0 bytes to learn bytes vs str)
            return b""
        if self._pending:
            if 0 < size < len(self._pending):
                chunk, self._pending = self._pending[:size], self._pending[size:]
            else:
                chunk, self._pending = self._pending, b""
                if size < 0 or size > len(chunk):
                    chunk += self._inner.read(-1 if size < 0 else size - len(chunk))
        else:
            chunk = self._inner.read(size)
        self.bytes_read += len(chunk)
        if self._on_progress is not None and chunk:
            self._on_progress(self.bytes_read, self._total)
        return chunk

    def close(self) -> None:
        if self._owns and not self.closed:
            self._inner.close()
        super().close()

    def readinto(self, buffer: memoryview | bytearray) -> int:  # type: ignore[override]
        chunk = self.read(len(buffer))
        buffer[: len(chunk)] = chunk
        return len(chunk)


class ImportSource:
    """A re-readable byte source.  ``open()`` always starts at the beginning."""

    def __init__(self, file: BinaryIO, name: str = "upload") -> None:
        self.name = name
        self._file = file
        self._zip: zipfile.ZipFile | None = None
        self._member: zipfile.ZipInfo | None = None
        file.seek(0)
        head = file.read(4)
        file.seek(0, io.SEEK_END)
        self._size = file.tell()
        file.seek(0)
        if head == _ZIP_MAGIC:
            self._open_zip()

    def _open_zip(self) -> None:
        try:
            archive = zipfile.ZipFile(self._file)
        except zipfile.BadZipFile as exc:
            raise ImportFormatError(
                f"The file looks like a ZIP archive but cannot be read: {exc}"
            ) from None
        members = [i for i in archive.infolist() if not i.is_dir()]
        wanted = [i for i in members if PurePosixPath(i.filename).name == "conversations.json"]
        if not wanted:
            wanted = [i for i in members if i.filename.lower().endswith(".json")]
        if len(wanted) != 1:
            raise ImportFormatError(
                "The ZIP archive holds no single conversations.json; unzip it and import the "
                "conversations file itself."
            )
        self._zip, self._member = archive, wanted[0]
        self._size = wanted[0].file_size

    @property
    def total_bytes(self) -> int:
        return self._size

    def open(self, on_progress: Progress | None = None) -> CountingReader:
        if self._zip is not None and self._member is not None:
            member: BinaryIO = self._zip.open(self._member)  # type: ignore[assignment]
            return CountingReader(member, self._size, on_progress, owns=True)
        self._file.seek(0)
        return CountingReader(self._file, self._size, on_progress)
