"""The state directory is private (SEC-3): the directory and every directory chatmem makes in
it 0700, every file 0600 — the SQLite database with its WAL and shared-memory files, the key
file, archives and their temporary files.

Modes are set when a file or directory is created (``os.open``/``os.mkdir`` with the mode,
never a later chmod, so there is no moment when it is readable); SQLite gives its ``-wal``
and ``-shm`` files the mode of the database file, which chatmem creates first, empty, 0600.
Existing installations are not changed behind the operator's back: at start,
:func:`warn_if_exposed` logs what is wider than that, with the command that fixes it.
"""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

log = logging.getLogger(__name__)

PRIVATE_DIR_MODE = 0o700
PRIVATE_FILE_MODE = 0o600
#: At most this many entries are looked at by :func:`exposed_paths` (a start stays fast).
MAX_CHECKED = 100_000


def make_private_dir(path: Path) -> Path:
    """``path`` as a directory; every level created here is 0700 (existing ones are kept)."""
    path = Path(path)
    missing = [p for p in (path, *path.parents) if not p.exists()]
    for level in reversed(missing):
        try:
            os.mkdir(level, PRIVATE_DIR_MODE)
        except FileExistsError:
            continue
        os.chmod(level, PRIVATE_DIR_MODE)  # exactly 0700 whatever the umask
    return path


def create_private_file(path: Path) -> bool:
    """Create ``path`` empty with mode 0600 unless it exists; True when it was created."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_FILE_MODE)
    except FileExistsError:
        return False
    os.close(fd)
    return True


def open_private(path: Path, mode: str = "wb") -> int:
    """A file descriptor for writing ``path`` (created 0600, truncated); for ``os.fdopen``."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
    if "x" in mode:
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL
    return os.open(path, flags, PRIVATE_FILE_MODE)


def _too_wide(mode: int) -> bool:
    return bool(stat.S_IMODE(mode) & 0o077)


def exposed_paths(root: Path, extra: tuple[Path, ...] = ()) -> list[tuple[Path, int]]:
    """``root`` (if it is wider than 0700), the entries under it and ``extra`` files that
    other local users may read or write, with their modes."""
    out: list[tuple[Path, int]] = []
    checked = 0
    root = Path(root)
    if root.is_dir():
        mode = root.stat().st_mode
        if _too_wide(mode):
            out.append((root, stat.S_IMODE(mode)))
        for dirpath, dirnames, filenames in os.walk(root):
            for name in [*dirnames, *filenames]:
                checked += 1
                if checked > MAX_CHECKED:
                    return out
                path = Path(dirpath) / name
                try:
                    mode = path.lstat().st_mode
                except OSError:
                    continue
                if stat.S_ISLNK(mode):
                    continue
                if _too_wide(mode):
                    out.append((path, stat.S_IMODE(mode)))
    for path in extra:
        try:
            mode = path.stat().st_mode
        except OSError:
            continue
        if _too_wide(mode) and all(path != p for p, _ in out):
            out.append((path, stat.S_IMODE(mode)))
    return out


def warn_if_exposed(root: Path, extra: tuple[Path, ...] = ()) -> list[tuple[Path, int]]:
    """Log a warning naming what other local users can read (SEC-3); returns it."""
    exposed = exposed_paths(root, extra)
    if exposed:
        shown = ", ".join(f"{path} ({mode:04o})" for path, mode in exposed[:5])
        more = f" and {len(exposed) - 5} more" if len(exposed) > 5 else ""
        log.warning(
            "The state directory is readable by other local users: %s%s. Conversations and "
            "keys live there; fix it with: chmod -R go-rwx %s",
            shown,
            more,
            root,
        )
    return exposed


def sqlite_files(database: Path) -> tuple[Path, ...]:
    """The database file of SQLite and the two files it keeps beside it in WAL mode."""
    return (database, Path(f"{database}-wal"), Path(f"{database}-shm"))
