"""Where import bytes come from: a seekable file (or a ZIP holding ``conversations.json``),
read as a stream with a byte counter for progress bars.

An import reads its input twice — a short sniff of the first items to learn the format, then
the full streamed parse — so a source hands out fresh streams from the start on demand.
ChatGPT and Claude both ship their data export as a ZIP; the member is streamed straight out
of the archive, never extracted to memory or disk (a member named ``../../x`` writes nothing),
and it may unpack to no more than an upload may hold (a ZIP bomb is refused by its declared
size; zipfile never yields more than that).

A ChatGPT ZIP also holds the images and files of the conversations, named by the export's
file id (``file-AbC123-painting.png``, ``user-…/file_00ab…-….png``): :meth:`ImportSource.
find_asset` reads one by that id, when it is asked for, up to ``max_string_bytes``.

Every stream is bounded before ijson sees a byte (SEC-1): a :class:`~chatmem.bounds.
JsonScanner` follows the bytes as they pass and refuses deep nesting, overlong strings and
oversized conversations with ``invalid_input``, so a 400 KB file of ``[`` costs nothing.
"""

from __future__ import annotations

import io
import re
import zipfile
import zlib
from collections.abc import Callable
from pathlib import PurePosixPath
from typing import BinaryIO

from chatmem.bounds import Bounds, JsonScanner
from chatmem.errors import ImportFormatError
from chatmem.formats.records import Asset

Progress = Callable[[int, int], None]  # (bytes read so far, total bytes)

_ZIP_MAGIC = b"PK\x03\x04"
_BOM = b"\xef\xbb\xbf"
# The file id a ChatGPT export names its files by: ``file-<base62>`` or ``file_<hex>``.
_FILE_ID = re.compile(r"(file[-_][0-9A-Za-z]+)(?=[-.]|$)")


class CountingReader(io.RawIOBase):
    """A read-only stream that reports how many bytes have passed through it."""

    def __init__(
        self,
        inner: BinaryIO,
        total: int,
        on_progress: Progress | None,
        *,
        owns: bool = False,
        scanner: JsonScanner | None = None,
    ) -> None:
        self._inner = inner
        self._owns = owns  # a ZIP member stream is ours to close; the caller's file is not
        self._total = total
        self._on_progress = on_progress
        self._scanner = scanner
        self.bytes_read = 0
        # Editors on Windows save UTF-8 with a byte-order mark, which JSON parsers refuse.
        head = self._read_inner(3)
        if head == _BOM:
            self.bytes_read = 3
        else:
            self._pending = head
            return
        self._pending = b""

    def readable(self) -> bool:
        return True

    @property
    def saw_nul(self) -> bool:
        """Whether a ``\\u0000`` escape has passed (strings parsed from here may hold NUL)."""
        return self._scanner is not None and self._scanner.saw_nul

    def read(self, size: int = -1) -> bytes:
        if size == 0:  # a type probe (ijson reads 0 bytes to learn bytes vs str)
            return b""
        if self._pending:
            if 0 < size < len(self._pending):
                chunk, self._pending = self._pending[:size], self._pending[size:]
            else:
                chunk, self._pending = self._pending, b""
                if size < 0 or size > len(chunk):
                    chunk += self._read_inner(-1 if size < 0 else size - len(chunk))
        else:
            chunk = self._read_inner(size)
        if self._scanner is not None:
            self._scanner.feed(chunk)  # SEC-1: refused before the parser builds anything
        self.bytes_read += len(chunk)
        if self._on_progress is not None and chunk:
            self._on_progress(self.bytes_read, self._total)
        return chunk

    def _read_inner(self, size: int) -> bytes:
        try:
            return self._inner.read(size)
        except (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError, RuntimeError) as exc:
            raise ImportFormatError(f"The ZIP archive is damaged: {exc}") from None

    def close(self) -> None:
        if self._owns and not self.closed:
            self._inner.close()
        super().close()

    def readinto(self, buffer: memoryview | bytearray) -> int:  # type: ignore[override]
        chunk = self.read(len(buffer))
        buffer[: len(chunk)] = chunk
        return len(chunk)


def _unsafe_name(name: str) -> bool:
    """Zip slip: an absolute path, a drive, or a ``..`` step (never extracted here, but a
    real export has none, so such an archive is taken for what it is)."""
    parts = name.replace("\\", "/").split("/")
    return name.startswith(("/", "\\")) or ".." in parts or (len(name) > 1 and name[1] == ":")


class ImportSource:
    """A re-readable byte source.  ``open()`` always starts at the beginning."""

    def __init__(
        self,
        file: BinaryIO,
        name: str = "upload",
        *,
        bounds: Bounds | None = None,
        max_unpacked_bytes: int | None = None,
    ) -> None:
        self.name = name
        self.bounds = bounds or Bounds()
        self.max_unpacked_bytes = max_unpacked_bytes
        self._file = file
        self._zip: zipfile.ZipFile | None = None
        self._member: zipfile.ZipInfo | None = None
        self._assets: dict[str, zipfile.ZipInfo] = {}
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
        except (zipfile.BadZipFile, zlib.error, EOFError, ValueError) as exc:
            raise ImportFormatError(
                f"The file looks like a ZIP archive but cannot be read: {exc}"
            ) from None
        members = [i for i in archive.infolist() if not i.is_dir()]
        for info in archive.infolist():
            if _unsafe_name(info.filename):
                raise ImportFormatError(
                    f"The ZIP archive holds an unsafe path ({info.filename[:100]!r}): a real "
                    "export never does, so it is refused."
                )
        wanted = [i for i in members if PurePosixPath(i.filename).name == "conversations.json"]
        if not wanted:
            wanted = [i for i in members if i.filename.lower().endswith(".json")]
        if len(wanted) != 1:
            raise ImportFormatError(
                "The ZIP archive holds no single conversations.json; unzip it and import the "
                "conversations file itself."
            )
        member = wanted[0]
        if self.max_unpacked_bytes is not None and member.file_size > self.max_unpacked_bytes:
            raise ImportFormatError(
                f"{member.filename} would unpack to {member.file_size:,} bytes, more than the "
                f"{self.max_unpacked_bytes:,} this server imports."
            )
        if member.flag_bits & 0x1:
            raise ImportFormatError("The ZIP archive is encrypted; unzip it and import the file.")
        self._zip, self._member = archive, member
        self._size = member.file_size
        for info in members:
            found = _FILE_ID.match(PurePosixPath(info.filename).name)
            if found and info is not member:
                self._assets.setdefault(found.group(1), info)

    def find_asset(self, file_id: str) -> Asset | None:
        """The bytes of the file the export names ``file_id``, when the ZIP holds them (and
        they are no larger than one string may be); ``None`` otherwise."""
        info = self._assets.get(file_id)
        if self._zip is None or info is None or info.flag_bits & 0x1:
            return None
        if info.file_size > self.bounds.max_string_bytes:
            return None
        name = PurePosixPath(info.filename).name[len(file_id) :].lstrip("-") or info.filename
        try:
            with self._zip.open(info) as member:
                data = member.read(self.bounds.max_string_bytes + 1)
        except (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError, RuntimeError) as exc:
            raise ImportFormatError(f"The ZIP archive is damaged: {exc}") from None
        if len(data) > self.bounds.max_string_bytes:
            return None
        return Asset(name=name, data=data)

    @property
    def total_bytes(self) -> int:
        return self._size

    def open(
        self,
        on_progress: Progress | None = None,
        *,
        item_depth: int | None = None,
        on_top_key: Callable[[str], None] | None = None,
    ) -> CountingReader:
        """A fresh stream from the start, bounded by :attr:`bounds`: ``item_depth`` is where
        the conversations are (their size is bounded), ``on_top_key`` sees each key of a
        top-level object (see :class:`~chatmem.bounds.JsonScanner`)."""
        scanner = JsonScanner(self.bounds, item_depth=item_depth, on_top_key=on_top_key)
        if self._zip is not None and self._member is not None:
            try:
                member: BinaryIO = self._zip.open(self._member)  # type: ignore[assignment]
            except (zipfile.BadZipFile, NotImplementedError, RuntimeError, ValueError) as exc:
                raise ImportFormatError(f"The ZIP archive cannot be read: {exc}") from None
            return CountingReader(member, self._size, on_progress, owns=True, scanner=scanner)
        self._file.seek(0)
        return CountingReader(self._file, self._size, on_progress, scanner=scanner)
