"""``chatmem backup DIR`` and ``chatmem restore DIR``: a consistent copy of the state while
the server runs, and that copy put back into an empty state directory.

What a backup holds: the SQLite database (``chatmem.db``, copied through SQLite's online
backup API from one read transaction: a snapshot, whatever the server writes meanwhile), the
key file (``secret.key``; none when the key comes from ``CHATMEM_ENCRYPTION_KEY`` — keep that
value with the backup), the archive folder (``archive/``: the archived conversations' files)
and ``chatmem-backup.json``, the manifest (format, version, schema revision, what is in it).

The archive's files and the snapshot agree: an archived conversation's file is in place
before the transaction that archives it commits (ARCH-2), so the files are copied first,
then the snapshot taken, then the files the snapshot names and the first pass missed copied
(archived in between); a file the snapshot names that is gone by then fails the backup
("run it again") rather than making a copy that would not restore.

PostgreSQL: the database is the operator's to dump (``pg_dump``); the backup copies the key
file and the archive folder and says so.  Restore refuses a state directory that holds a
database, a key or archives already.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy.engine import make_url

from chatmem import __version__
from chatmem.errors import InvalidInput
from chatmem.security.private_dir import make_private_dir
from chatmem.security.secret_box import KEY_FILE_NAME
from chatmem.settings import Settings

FORMAT = "chatmem.backup/1"
MANIFEST = "chatmem-backup.json"
DATABASE_FILE = "chatmem.db"
ARCHIVE_DIR = "archive"


@dataclass
class BackupReport:
    database: str  # "sqlite" | "postgresql"
    copied_database: bool
    key: str  # "file" | "environment" | "none"
    archive_files: int
    schema: str | None
    notes: list[str] = field(default_factory=list)


def _sqlite_path(settings: Settings) -> Path | None:
    url = make_url(settings.sqlalchemy_url())
    if not url.drivername.startswith("sqlite"):
        return None
    if not url.database or url.database == ":memory:":
        raise InvalidInput("an in-memory database cannot be backed up")
    return Path(url.database)


def _empty_dir(path: Path, what: str) -> None:
    if path.exists() and (not path.is_dir() or any(path.iterdir())):
        raise InvalidInput(f"{what} {path} is not an empty folder")
    make_private_dir(path)


def _copy_tree(source: Path, target: Path, only: set[str] | None = None) -> int:
    """Copies the files under ``source`` (those named in ``only``, relative, when given) that
    ``target`` lacks; returns how many."""
    copied = 0
    if not source.is_dir():
        return 0
    for path in sorted(source.rglob("*")):
        relative = path.relative_to(source).as_posix()
        if not path.is_file() or relative.endswith(".tmp"):
            continue
        if only is not None and relative not in only:
            continue
        destination = target / relative
        if destination.exists():
            continue
        destination.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        try:
            shutil.copy2(path, destination)
        except FileNotFoundError:
            continue  # restored meanwhile; the check against the snapshot decides
        copied += 1
    return copied


def _snapshot(source: Path, target: Path) -> str | None:
    """SQLite's online backup of ``source`` into ``target`` from one read transaction;
    returns the snapshot's schema revision."""
    with (
        sqlite3.connect(source) as src,
        sqlite3.connect(target) as dst,
    ):
        src.execute("BEGIN")
        row = src.execute("SELECT version_num FROM alembic_version").fetchone()
        src.backup(dst)
        src.execute("COMMIT")
    src.close()
    dst.close()
    return str(row[0]) if row else None


def _archived_files(database: Path) -> set[str]:
    """The archive files the database names (``<user>/<conversation>.json.zst``)."""
    with sqlite3.connect(database) as connection:
        rows = connection.execute(
            "SELECT user_id, conversation_id FROM archives WHERE storage = 'file'"
        ).fetchall()
    connection.close()
    return {f"{user}/{conversation}.json.zst" for user, conversation in rows}


def backup(settings: Settings, target: Path, say: Callable[[str], None] = print) -> BackupReport:
    """Writes a backup of the state into ``target`` (an empty or new folder)."""
    _empty_dir(target, "the backup folder")
    state = settings.state_dir
    archive, archive_copy = state / ARCHIVE_DIR, target / ARCHIVE_DIR
    sqlite_path = _sqlite_path(settings)
    report = BackupReport(
        database="sqlite" if sqlite_path else "postgresql",
        copied_database=False,
        key="none",
        archive_files=0,
        schema=None,
    )
    report.archive_files = _copy_tree(archive, archive_copy)
    if sqlite_path is not None:
        if not sqlite_path.exists():
            raise InvalidInput(f"there is no database at {sqlite_path}")
        report.schema = _snapshot(sqlite_path, target / DATABASE_FILE)
        report.copied_database = True
        named = _archived_files(target / DATABASE_FILE)
        report.archive_files += _copy_tree(archive, archive_copy, only=named)
        missing = sorted(n for n in named if not (archive_copy / n).is_file())
        if missing:
            shutil.rmtree(target)
            raise InvalidInput(
                f"{len(missing)} archived conversation(s) changed during the backup; run it again"
            )
    else:
        report.notes.append(
            "PostgreSQL: dump the database with pg_dump (e.g. pg_dump -Fc -f chatmem.dump "
            "$CHATMEM_DATABASE_URL) beside this folder; it holds the key and the archive folder."
        )
    key = state / KEY_FILE_NAME
    if key.is_file():
        shutil.copy2(key, target / KEY_FILE_NAME)
        report.key = "file"
    elif settings.encryption_key:
        report.key = "environment"
        report.notes.append(
            "The key comes from CHATMEM_ENCRYPTION_KEY: keep that value with the backup; "
            "without it the stored API keys cannot be read."
        )
    _write_manifest(target, report)
    for note in report.notes:
        say(note)
    return report


def _write_manifest(target: Path, report: BackupReport) -> None:
    manifest: dict[str, Any] = {
        "format": FORMAT,
        "chatmem": __version__,
        "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "database": report.database,
        "database_file": DATABASE_FILE if report.copied_database else None,
        "schema": report.schema,
        "key": report.key,
        "archive_files": report.archive_files,
    }
    (target / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")


def read_manifest(source: Path) -> dict[str, Any]:
    try:
        manifest = json.loads((source / MANIFEST).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InvalidInput(f"{source} holds no chatmem backup ({MANIFEST} is missing)") from None
    except ValueError:
        raise InvalidInput(f"{source / MANIFEST} is not valid JSON") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise InvalidInput(f"{source / MANIFEST} is not a {FORMAT} manifest")
    return manifest


def restore(settings: Settings, source: Path, say: Callable[[str], None] = print) -> dict[str, Any]:
    """Puts the backup in ``source`` into the (empty) state directory."""
    manifest = read_manifest(source)
    state = settings.state_dir
    taken = [
        name
        for name in (DATABASE_FILE, KEY_FILE_NAME, ARCHIVE_DIR)
        if (state / name).exists() and (name != ARCHIVE_DIR or any((state / name).iterdir()))
    ]
    if taken:
        raise InvalidInput(
            f"the state folder {state} is not empty ({', '.join(taken)}): restore into a new one"
        )
    make_private_dir(state)
    sqlite_path = _sqlite_path(settings)
    if manifest.get("database_file"):
        if sqlite_path is None:
            raise InvalidInput("this backup holds a SQLite database; unset CHATMEM_DATABASE_URL")
        if sqlite_path.exists():
            raise InvalidInput(f"{sqlite_path} exists already: restore into a new state folder")
        _check_integrity(source / DATABASE_FILE)
        shutil.copy2(source / DATABASE_FILE, sqlite_path)
    else:
        say("This backup holds no database: restore the PostgreSQL dump with pg_restore.")
    if (source / KEY_FILE_NAME).is_file():
        shutil.copy2(source / KEY_FILE_NAME, state / KEY_FILE_NAME)
        (state / KEY_FILE_NAME).chmod(0o600)
    elif manifest.get("key") == "environment":
        say("The key came from CHATMEM_ENCRYPTION_KEY: set the same value before starting.")
    _copy_tree(source / ARCHIVE_DIR, state / ARCHIVE_DIR)
    return manifest


def _check_integrity(database: Path) -> None:
    with sqlite3.connect(f"file:{database}?mode=ro", uri=True) as connection:
        result = connection.execute("PRAGMA integrity_check").fetchone()
    connection.close()
    if not result or result[0] != "ok":
        raise InvalidInput(f"{database} is damaged: {result[0] if result else 'no answer'}")
