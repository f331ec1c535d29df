"""Archive: conversations moved out of the live tables into zstd documents (ARCH-1, ARCH-2).

Theory of operation
-------------------
An archived conversation keeps its ``conversations`` row (title, folder, pin, with
``archived_at`` set — so ownership checks and title search keep working) plus one
``archives`` row; its messages, summaries and files leave the live tables and live in one
zstd-compressed ``chatmem.export/1`` document (a valid export with one conversation; each
message also carries its cached token counts so a restore need not re-tokenize).

Where the bytes live (``CHATMEM_ARCHIVE_STORAGE``): ``file`` —
``<state_dir>/archive/<user_id>/<conversation_id>.json.zst``; ``database`` — the same bytes
in ``archives.blob``.  ``auto`` picks ``database`` on PostgreSQL (replicas share no disk,
and backups of the database then hold the archives too) and ``file`` on SQLite.

ARCH-2 — the new copy is written and verified before the old one goes.  The database
transaction that sets ``archived_at`` is the single commit point, and it deletes the live rows
in the same transaction, so there is never a moment with neither copy:

archive:  ``snapshot`` (read the conversation, stream it compressed into ``<id>.json.zst.tmp``,
          hash the raw document) → ``written`` (fsync) → ``verified`` (decompress the temp file,
          compare the SHA-256) → ``renamed`` (atomic rename, fsync the directory) →
          ``committed`` (one transaction: the conversation has not changed since the snapshot,
          insert the archive row, set ``archived_at``, delete the live rows).
restore:  ``read`` → ``verified`` (hash) → ``committed`` (one transaction: insert the live rows,
          clear ``archived_at``, delete the archive row) → ``removed`` (unlink the file).
delete:   ``committed`` (delete the conversation row; the archive row cascades) → ``removed``.

A crash before ``committed`` leaves the conversation live and whole (at worst with a stray
file that the next archive overwrites); after it, the conversation is archived (or restored)
and whole.  Repeating an interrupted operation completes it: archiving an archived
conversation, or restoring a live one, is a no-op that only tidies a stray file.

``on_step`` is the documented seam the crash test uses: it is called with
``"<operation>:<step>"`` after each step above; the test's hook ends the process there.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

import zstandard
from sqlalchemy import delete, func, insert, select
from sqlalchemy.orm import Session

from chatmem.errors import (
    ArchiveDamaged,
    Conflict,
    InvalidInput,
    NotFound,
    QuotaExceeded,
    TurnRunning,
)
from chatmem.formats.native import native_conversation
from chatmem.security.private_dir import make_private_dir, open_private
from chatmem.settings import Settings
from chatmem.store.db import Database
from chatmem.store.exchange.exporter import export_stream
from chatmem.store.exchange.importer import (
    fact_rows,
    file_rows,
    message_rows,
    summary_rows,
    version_rows,
)
from chatmem.store.quotas import UNLIMITED, Limits
from chatmem.store.search import insert_messages
from chatmem.store.tables.accounts import User
from chatmem.store.tables.archives import Archive
from chatmem.store.tables.conversations import (
    TOKEN_COLUMNS,
    Conversation,
    File,
    Folder,
    Message,
    MessageVersion,
    Summary,
)
from chatmem.store.tables.pinned_facts import PinnedFactBlockRow, PinnedFactRow
from chatmem.store.tables.runs import Run
from chatmem.store.types import is_own_id, iso, new_id, utcnow

Storage = Literal["file", "database"]
StepHook = Callable[[str], None]

ARCHIVE_STEPS = ("snapshot", "written", "verified", "renamed", "committed")
RESTORE_STEPS = ("read", "verified", "committed", "removed")
DELETE_STEPS = ("committed", "removed")
ZSTD_LEVEL = 3  # fast; archives are text and compress ~5x even at this level
_CHUNK = 1 << 20
MAX_PAGE = 200


@dataclass(frozen=True)
class ArchiveEntry:
    """One archived conversation as the archive list shows it."""

    id: str
    title: str
    folder: str | None
    folder_id: str | None
    pinned: bool
    mode: str
    archived_at: datetime
    message_count: int
    raw_bytes: int
    stored_bytes: int

    def as_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "title": self.title,
            "folder": self.folder,
            "folder_id": self.folder_id,
            "pinned": self.pinned,
            "mode": self.mode,
            "archived_at": iso(self.archived_at),
            "message_count": self.message_count,
            "size": self.raw_bytes,
            "stored_size": self.stored_bytes,
            "archived": True,
        }


def storage_for(settings: Settings, db: Database) -> Storage:
    if settings.archive_storage == "auto":
        return "file" if db.is_sqlite else "database"
    return settings.archive_storage


def _fsync_dir(path: Path) -> None:
    # Makes a rename or unlink durable (POSIX); Windows cannot open directories.
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _check_room(session: Session, user_id: str, limits: Limits) -> None:
    if limits.conversations is None:
        return
    live = session.scalar(
        select(func.count())
        .select_from(Conversation)
        .where(Conversation.user_id == user_id, Conversation.archived_at.is_(None))
    )
    if (live or 0) >= limits.conversations:
        raise QuotaExceeded("conversations", limits.conversations)


def _refuse_while_running(session: Session, conversation_id: str) -> None:
    """A turn still writing into the conversation would write into an archived one."""
    running = session.scalar(
        select(Run.id)
        .where(Run.conversation_id == conversation_id, Run.status == "running")
        .limit(1)
    )
    if running is not None:
        raise TurnRunning("A turn is running in this conversation; archive it when it is done.")


def _fingerprint(session: Session, conversation_id: str) -> tuple[Any, ...]:
    """What must not change between the snapshot and the commit."""
    messages = session.execute(
        select(func.count(), func.max(Message.seq)).where(
            Message.conversation_id == conversation_id
        )
    ).one()
    summaries = session.scalar(
        select(func.count()).select_from(Summary).where(Summary.conversation_id == conversation_id)
    )
    files = session.execute(
        select(File.id, File.state, File.message_id)
        .where(File.conversation_id == conversation_id)
        .order_by(File.id)
    ).all()
    excluded = session.scalar(
        select(func.count())
        .select_from(Message)
        .where(Message.conversation_id == conversation_id, Message.excluded.is_(True))
    )
    hidden = session.scalars(  # PROJ-3: which versions are shown
        select(Message.id).where(Message.conversation_id == conversation_id, Message.hidden)
    ).all()
    return (tuple(messages), summaries, tuple(tuple(f) for f in files), excluded, tuple(hidden))


class Archiver:
    """Archive, read, search, restore and delete archived conversations of one database."""

    def __init__(
        self,
        db: Database,
        state_dir: Path,
        *,
        storage: Storage = "file",
        on_step: StepHook | None = None,
        level: int = ZSTD_LEVEL,
    ) -> None:
        self.db = db
        self.root = Path(state_dir) / "archive"
        self.storage = storage
        self.on_step = on_step
        self.level = level

    @classmethod
    def from_settings(cls, settings: Settings, db: Database, **kwargs: Any) -> Archiver:
        return cls(db, settings.state_dir, storage=storage_for(settings, db), **kwargs)

    # -- helpers --------------------------------------------------------------------------

    def _step(self, operation: str, step: str) -> None:
        if self.on_step is not None:
            self.on_step(f"{operation}:{step}")

    def path_for(self, user_id: str, conversation_id: str) -> Path:
        """The archive file of a conversation: named by the conversation's own id, which
        must be of chatmem's form, and lying under its user's folder once resolved — checked
        here, where every caller gets its path, so no id can name a file elsewhere."""
        if not (is_own_id(user_id) and is_own_id(conversation_id)):
            raise InvalidInput(
                "This conversation's id is not of chatmem's form and cannot name an archive "
                "file; export the conversation and import the file to give it a new id.",
                conversation_id=conversation_id,
            )
        folder = (self.root / user_id).resolve()
        path = (folder / f"{conversation_id}.json.zst").resolve()
        if path.parent != folder:  # a symbolic link planted under the folder
            raise InvalidInput("The archive file would lie outside its folder.")
        return path

    @staticmethod
    def _owned(
        session: Session, user_id: str, conversation_id: str, *, lock: bool = False
    ) -> Conversation:
        # ``lock``: the commit transactions hold the row (PostgreSQL) so a concurrent write
        # to the conversation waits for them; SQLite writers are serialised by BEGIN IMMEDIATE.
        conversation = session.get(Conversation, conversation_id, with_for_update=lock or None)
        if conversation is None or conversation.user_id != user_id:
            raise NotFound("conversation")
        return conversation

    def _archived(
        self, session: Session, user_id: str, conversation_id: str
    ) -> tuple[Conversation, Archive]:
        conversation = self._owned(session, user_id, conversation_id)
        record = session.get(Archive, conversation_id)
        if conversation.archived_at is None or record is None:
            raise NotFound("archived conversation")
        return conversation, record

    def _document(self, session: Session, conversation_id: str) -> Any:
        return export_stream(session, [conversation_id], with_tokens=True)

    # -- archive --------------------------------------------------------------------------

    def archive(self, user: User | str, conversation_id: str) -> ArchiveEntry:
        user_id = user if isinstance(user, str) else user.id
        with self.db.session() as session:
            conversation = self._owned(session, user_id, conversation_id)
            if conversation.archived_at is not None:  # repeated: already done
                return self.entry(session, conversation_id)
            _refuse_while_running(session, conversation_id)
            before = _fingerprint(session, conversation_id)
            count = before[0][0]
            digest = hashlib.sha256()
            raw = 0
            compressor = zstandard.ZstdCompressor(level=self.level, write_checksum=True)
            if self.storage == "file":
                path = self.path_for(user_id, conversation_id)
                make_private_dir(path.parent)  # SEC-3: 0700 directories, 0600 files
                temp = path.with_name(path.name + ".tmp")
                with os.fdopen(open_private(temp), "wb") as out:
                    with compressor.stream_writer(out, closefd=False) as writer:
                        for chunk in self._document(session, conversation_id):
                            digest.update(chunk)
                            raw += len(chunk)
                            writer.write(chunk)
                    self._step("archive", "snapshot")
                    out.flush()
                    os.fsync(out.fileno())
                blob = None
            else:
                buffer = io.BytesIO()
                with compressor.stream_writer(buffer, closefd=False) as writer:
                    for chunk in self._document(session, conversation_id):
                        digest.update(chunk)
                        raw += len(chunk)
                        writer.write(chunk)
                blob = buffer.getvalue()
                self._step("archive", "snapshot")
        sha = digest.hexdigest()
        self._step("archive", "written")
        if self.storage == "file":
            self._verify_file(temp, sha)
            self._step("archive", "verified")
            os.replace(temp, path)
            _fsync_dir(path.parent)
            self._step("archive", "renamed")
            stored = path.stat().st_size
        else:
            assert blob is not None
            stored = len(blob)
        with self.db.session(write=True) as session:
            conversation = self._owned(session, user_id, conversation_id, lock=True)
            if conversation.archived_at is not None:
                return self.entry(session, conversation_id)
            _refuse_while_running(session, conversation_id)
            if _fingerprint(session, conversation_id) != before:
                raise Conflict("The conversation changed while it was being archived; try again.")
            session.add(
                Archive(
                    conversation_id=conversation_id,
                    user_id=user_id,
                    storage=self.storage,
                    sha256=sha,
                    raw_bytes=raw,
                    stored_bytes=stored,
                    message_count=count,
                    archived_at=utcnow(),
                    blob=blob,
                )
            )
            session.flush()
            if blob is not None:  # verify what the database really holds before deleting
                stored_blob = session.scalar(
                    select(Archive.blob).where(Archive.conversation_id == conversation_id)
                )
                self._verify(stored_blob, sha)
                self._step("archive", "verified")
            conversation.archived_at = utcnow()
            conversation.has_pinned_facts = False  # CTX-24: they travel in the archive
            for table in (
                File,
                Summary,
                MessageVersion,
                Message,
                PinnedFactRow,
                PinnedFactBlockRow,
            ):
                session.execute(delete(table).where(table.conversation_id == conversation_id))
        self._step("archive", "committed")
        with self.db.session() as session:
            return self.entry(session, conversation_id)

    # -- reading --------------------------------------------------------------------------

    def _verify(self, data: bytes | None, sha: str, *, path: Path | None = None) -> bytes:
        """Decompress and check the hash; returns the raw document."""
        try:
            if path is not None:
                data = path.read_bytes()
            if data is None:
                raise ArchiveDamaged("The archived copy is missing.")
            document = zstandard.ZstdDecompressor().decompressobj().decompress(data)
        except FileNotFoundError:
            raise ArchiveDamaged("The archive file is missing.") from None
        except zstandard.ZstdError as exc:
            raise ArchiveDamaged(f"The archive cannot be decompressed: {exc}") from None
        if hashlib.sha256(document).hexdigest() != sha:
            raise ArchiveDamaged("The archive does not match its recorded hash.")
        return document

    @staticmethod
    def _verify_file(path: Path, sha: str) -> None:
        """Streamed check of a written file: decompress it and compare the SHA-256."""
        digest = hashlib.sha256()
        try:
            with open(path, "rb") as raw, zstandard.ZstdDecompressor().stream_reader(raw) as reader:
                while chunk := reader.read(_CHUNK):
                    digest.update(chunk)
        except zstandard.ZstdError as exc:
            raise ArchiveDamaged(f"The archive just written cannot be read back: {exc}") from None
        if digest.hexdigest() != sha:
            raise ArchiveDamaged("The archive just written does not match the conversation.")

    def _load(self, session: Session, record: Archive, user_id: str) -> bytes:
        if record.storage == "database":
            return self._verify(record.blob, record.sha256)
        return self._verify(
            None, record.sha256, path=self.path_for(user_id, record.conversation_id)
        )

    def read(self, user: User | str, conversation_id: str) -> dict[str, Any]:
        """The archived conversation, whole, as an export conversation object (no change)."""
        user_id = user if isinstance(user, str) else user.id
        with self.db.session() as session:
            conversation, record = self._archived(session, user_id, conversation_id)
            document = self._load(session, record, user_id)
            archived_at = iso(conversation.archived_at)
        item: dict[str, Any] = json.loads(document)["conversations"][0]
        for message in item.get("messages", []):  # archive-only extras: the export shape
            for key in ("tokens", "seq", "meta"):
                message.pop(key, None)
        item["archived_at"] = archived_at
        return item

    def require_archived(self, user: User | str, conversation_id: str) -> ArchiveEntry:
        """The archive entry of the user's archived conversation, else NotFound."""
        user_id = user if isinstance(user, str) else user.id
        with self.db.session() as session:
            self._archived(session, user_id, conversation_id)
            return self.entry(session, conversation_id)

    def entry(self, session: Session, conversation_id: str) -> ArchiveEntry:
        row = session.execute(
            select(Conversation, Archive, Folder.name)
            .join(Archive, Archive.conversation_id == Conversation.id)
            .outerjoin(Folder, Folder.id == Conversation.folder_id)
            .where(Conversation.id == conversation_id)
        ).one()
        return _entry(row[0], row[1], row[2])

    def search(
        self, user: User | str, q: str | None = None, *, limit: int = 50, offset: int = 0
    ) -> tuple[list[ArchiveEntry], int]:
        """Archived conversations whose title contains ``q`` (case-insensitive), newest
        archive first; returns a page and the total."""
        if not 1 <= limit <= MAX_PAGE:
            raise InvalidInput(f"limit: between 1 and {MAX_PAGE}")
        if offset < 0:
            raise InvalidInput("offset: must not be negative")
        user_id = user if isinstance(user, str) else user.id
        where = [Conversation.user_id == user_id, Conversation.archived_at.is_not(None)]
        if q and q.strip():
            escaped = q.strip().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
            where.append(Conversation.title.ilike(f"%{escaped}%", escape="\\"))
        with self.db.session() as session:
            total = (
                session.scalar(
                    select(func.count())
                    .select_from(Conversation)
                    .join(Archive, Archive.conversation_id == Conversation.id)
                    .where(*where)
                )
                or 0
            )
            rows = session.execute(
                select(Conversation, Archive, Folder.name)
                .join(Archive, Archive.conversation_id == Conversation.id)
                .outerjoin(Folder, Folder.id == Conversation.folder_id)
                .where(*where)
                .order_by(Archive.archived_at.desc(), Conversation.id.desc())
                .limit(limit)
                .offset(offset)
            ).all()
            return [_entry(r[0], r[1], r[2]) for r in rows], total

    # -- restore --------------------------------------------------------------------------

    def restore(
        self, user: User | str, conversation_id: str, *, limits: Limits = UNLIMITED
    ) -> None:
        """Bring an archived conversation back whole.  With a conversation quota (STORE-4)
        a restore that would exceed it is refused — evicting another conversation, or this
        old one, to make room would be a surprise."""
        user_id = user if isinstance(user, str) else user.id
        with self.db.session() as session:
            conversation = self._owned(session, user_id, conversation_id)
            if conversation.archived_at is None:  # repeated: already live; tidy a stray file
                self._remove_file(user_id, conversation_id)
                return
            record = session.get(Archive, conversation_id)
            if record is None:
                raise ArchiveDamaged("The archive record of this conversation is missing.")
            self._step("restore", "read")
            document = self._load(session, record, user_id)
        self._step("restore", "verified")
        item = json.loads(document)["conversations"][0]
        imported = native_conversation(item)
        columns = set(TOKEN_COLUMNS.values())
        cached = {
            m["id"]: {
                "tokens": m["tokens"] if set(m.get("tokens") or ()) == columns else None,
                "seq": m.get("seq"),
                "meta": m.get("meta"),
            }
            for m in item.get("messages", [])
        }
        del item, document
        with self.db.session(write=True) as session:
            conversation = self._owned(session, user_id, conversation_id, lock=True)
            if conversation.archived_at is None:
                return
            ids = [m.id for m in imported.messages]
            taken: set[str] = set()
            for start in range(0, len(ids), 500):
                taken.update(
                    session.scalars(
                        select(Message.id).where(Message.id.in_(ids[start : start + 500]))
                    )
                )
            mids = {i: (new_id() if i in taken else i) for i in ids}
            fids = {f.id: f.id for f in imported.files}
            if imported.files and session.scalar(
                select(File.id).where(File.id.in_(list(fids))).limit(1)
            ):
                fids = {i: new_id() for i in fids}
            now = utcnow()
            rows = list(message_rows(imported, conversation_id, mids, now, cached=cached))
            for start in range(0, len(rows), 2_000):  # with the full-text index, per batch
                insert_messages(session.connection(), rows[start : start + 2_000])
            del rows
            summaries = list(summary_rows(imported, conversation_id, mids, now))
            if summaries:
                session.execute(insert(Summary), summaries)
            files = list(file_rows(imported, conversation_id, mids, fids, now))
            if files:
                session.execute(insert(File), files)
            kept = list(version_rows(imported, conversation_id, mids, now))  # PROJ-3
            if kept:
                session.execute(insert(MessageVersion), kept)
            for table, row in fact_rows(imported, conversation_id, mids, now):  # CTX-24
                session.execute(insert(table), [row])
                conversation.has_pinned_facts = True
            _check_room(session, user_id, limits)
            conversation.archived_at = None
            session.execute(delete(Archive).where(Archive.conversation_id == conversation_id))
        self._step("restore", "committed")
        self._remove_file(user_id, conversation_id)
        self._step("restore", "removed")

    def _remove_file(self, user_id: str, conversation_id: str) -> None:
        if not is_own_id(conversation_id):
            return  # no archive file can bear a name of another form
        path = self.path_for(user_id, conversation_id)
        for candidate in (path, path.with_name(path.name + ".tmp")):
            try:
                candidate.unlink()
            except FileNotFoundError:
                continue
            _fsync_dir(candidate.parent)

    # -- permanent delete -----------------------------------------------------------------

    def delete(self, user: User | str, conversation_id: str) -> None:
        user_id = user if isinstance(user, str) else user.id
        with self.db.session(write=True) as session:
            conversation, _ = self._archived(session, user_id, conversation_id)
            session.delete(conversation)  # the archive row goes with it (ON DELETE CASCADE)
            session.execute(delete(Archive).where(Archive.conversation_id == conversation_id))
        self._step("delete", "committed")
        self._remove_file(user_id, conversation_id)
        self._step("delete", "removed")


def _entry(conversation: Conversation, record: Archive, folder: str | None) -> ArchiveEntry:
    return ArchiveEntry(
        id=conversation.id,
        title=conversation.title,
        folder=folder,
        folder_id=conversation.folder_id,
        pinned=bool(conversation.pinned),
        mode=conversation.mode,
        archived_at=record.archived_at,
        message_count=record.message_count,
        raw_bytes=record.raw_bytes,
        stored_bytes=record.stored_bytes,
    )


def archive_imported(archiver: Archiver, user_id: str, conversation_ids: list[str]) -> int:
    """Archive again the imported conversations that were archived at their source (after
    the import committed); returns how many.  One a quota evicted meanwhile is skipped."""
    done = 0
    for conversation_id in conversation_ids:
        try:
            archiver.archive(user_id, conversation_id)
        except NotFound:
            continue
        done += 1
    return done
