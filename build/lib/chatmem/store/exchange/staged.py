"""An import written in short transactions and shown all at once (the server's import).

SQLite lets one writer in at a time: an import written in one transaction kept every other
user's writes waiting for as long as it took (27.8 s for 20,000 conversations).  The server's
import therefore writes in units of at most :data:`UNIT_ROWS` rows or :data:`UNIT_SECONDS`,
each its own transaction, so other writes go in between — while what anybody sees stays all
or nothing, as with one transaction:

1. *Read*, without the database: the file is parsed, validated and counted into a spool
   (:func:`read_prepared`); a malformed file stops here.
2. *Begin*: the conversations already present are looked up (a read), and a **staging
   owner** is made (one short unit) — a ``users`` row, disabled, with no password, named
   ``:import:<id>`` (outside the user-name pattern: no account has or can take it).
3. *Write* (many units): the conversations go in owned by the staging owner.  Every read of
   conversations is scoped to their owner (STORE-1: lists, search, the archive, reads by id,
   quotas, exports), so nobody sees them yet.  Their folders and projects wait for step 4:
   those are the user's own rows, found or made by name, and must not appear half-way either.
4. *Finish* (one unit): the folders and projects found or made, the conversations handed to
   the user in one ``UPDATE``, the quotas enforced, the owner deleted: the import appears
   whole, or — a quota, a concurrent import of the same file — not at all.

On any failure the staged conversations are deleted a unit at a time, then their owner.  A
crash leaves an owner behind: every unit touches its ``created_at`` (a heartbeat), and the
next import or server start discards owners silent for :data:`STALE_AFTER`
(:func:`sweep_stale`).

:func:`run_staged` drives the steps through :class:`Units`: the server runs each write unit
in a worker thread once it holds the write slot, the CLI and tests in plain transactions.  A
unit may run again after ``database is locked`` (it was rolled back whole), so a unit changes
this object's state only after its statements.
"""

from __future__ import annotations

import functools
import logging
import pickle
import tempfile
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from datetime import datetime, timedelta
from typing import IO, Any, Protocol, TypeVar

from sqlalchemy import delete, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from chatmem.errors import Conflict, Unauthorized
from chatmem.formats.reader import read_conversations, sniff
from chatmem.formats.source import ImportSource
from chatmem.store import projects, quotas
from chatmem.store.db import Database
from chatmem.store.exchange.importer import (
    ImportResult,
    Prepared,
    _Batch,
    _folder_id,
    _replay,
    _write,
    already_present,
    prepare,
)
from chatmem.store.quotas import UNLIMITED, Limits
from chatmem.store.tables.accounts import User
from chatmem.store.tables.conversations import Conversation
from chatmem.store.token_counts import tokenizers_in_use
from chatmem.store.types import new_id, utcnow

T = TypeVar("T")
log = logging.getLogger(__name__)

#: The name of a staging owner starts so (a real user name starts with a letter or digit).
STAGING_PREFIX = ":import:"
#: A write unit stops taking conversations past this many rows or this long (it takes at
#: least one: a conversation is never split).
UNIT_ROWS = 300
UNIT_SECONDS = 0.05
#: Staged conversations deleted per unit when an import is given up.
DISCARD_CONVERSATIONS = 100
#: A staging owner whose import wrote nothing for this long was left by a crash.
STALE_AFTER = timedelta(minutes=10)
_IN_CHUNK = 500


class Units(Protocol):
    """Runs units of database work: each ``fn(session)`` in a transaction of its own."""

    def read(self, fn: Callable[[Session], T], /) -> T: ...

    def write(self, fn: Callable[[Session], T], /) -> T: ...


class Transactions:
    """:class:`Units` as plain transactions of ``db`` in this thread (the CLI, tests)."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def read(self, fn: Callable[[Session], T], /) -> T:
        with self.db.session() as session:
            return fn(session)

    def write(self, fn: Callable[[Session], T], /) -> T:
        with self.db.session(write=True) as session:
            return fn(session)


def _live_user(session: Session, user_id: str) -> User:
    user = session.get(User, user_id)
    if user is None or user.disabled:
        raise Unauthorized("This account is disabled; ask an administrator.")
    return user


def _rows(item: Prepared) -> int:
    conversation = item[0]
    return (
        1
        + len(conversation.messages)
        + len(conversation.files)
        + len(conversation.summaries)
        + len(conversation.versions)
    )


class StagedImport:
    """One import's staged state: its owner, what went in, what waits for the finish."""

    def __init__(
        self,
        user_id: str,
        fmt: str,
        keys: Iterable[tuple[str, str]],
        *,
        limits: Limits = UNLIMITED,
        unit_rows: int = UNIT_ROWS,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        self.user_id = user_id
        self.unit_rows = unit_rows
        self.fmt = fmt
        self.limits = limits
        self.owner = new_id()
        self.result = ImportResult(format=fmt)
        self.begun = False
        self._keys = list(keys)
        self._clock = clock
        self._present: set[str] = set()
        self._seen: set[str] = set()
        self._folders: dict[str, list[str]] = {}  # folder name -> staged conversation ids
        self._projects: list[tuple[Any, str]] = []  # (the file's project, conversation id)

    def look_up(self, session: Session) -> None:
        """Read: the conversations of the file the user already has (skipped).  One that
        comes in meanwhile (the same file imported twice at once) is refused at the finish."""
        self._present = already_present(session, _live_user(session, self.user_id), self._keys)

    def begin(self, session: Session) -> None:
        """Unit: the staging owner made."""
        _live_user(session, self.user_id)
        session.add(
            User(
                id=self.owner,
                name=STAGING_PREFIX + self.owner,
                password_hash=None,
                is_admin=False,
                disabled=True,
                evicted_conversations=0,
                evicted_messages=0,
                created_at=self._clock(),
            )
        )
        session.flush()
        self.begun = True

    def write(self, session: Session, items: Sequence[Prepared]) -> int:
        """Unit: conversations from the head of ``items`` written, staged — at least one, then
        up to ``unit_rows`` rows or :data:`UNIT_SECONDS`.  Returns how many it took."""
        started = time.monotonic()
        owner = User(id=self.owner, evicted_messages=0)  # not added: only its id is read
        batch = _Batch(session)
        part = ImportResult()
        seen: set[str] = set()
        folders: list[tuple[str, str]] = []
        placed: list[tuple[Any, str]] = []
        taken = rows = 0
        for conversation, counted in items:
            if taken and (rows >= self.unit_rows or time.monotonic() - started >= UNIT_SECONDS):
                break
            taken += 1
            key = conversation.source_key
            if self.fmt != "chatmem" and not conversation.messages:
                part.skipped_empty += 1
                continue
            if key in seen or key in self._seen or key in self._present:
                part.skipped += 1
                continue
            seen.add(key)
            rows += _rows((conversation, counted))
            fresh = self.fmt != "chatmem"
            cid = _write(
                session, owner, conversation, None, batch, fresh_ids=fresh, counted=counted
            )
            if conversation.folder and conversation.folder.strip():
                folders.append((conversation.folder.strip(), cid))
            if conversation.extra.get("project"):
                placed.append((conversation.extra["project"], cid))
            part.imported += 1
            part.messages += len(conversation.messages)
            part.conversation_ids.append(cid)
            if conversation.archived:
                part.archived_ids.append(cid)
        batch.flush()
        if self.limits.messages is not None:
            for cid in part.conversation_ids:
                part.evicted_messages += quotas.enforce_message_quota(
                    session, owner, cid, self.limits
                )
        self._heartbeat(session)
        self._take(part, seen, folders, placed)
        return taken

    def _take(
        self,
        part: ImportResult,
        seen: set[str],
        folders: list[tuple[str, str]],
        placed: list[tuple[Any, str]],
    ) -> None:
        result = self.result
        result.imported += part.imported
        result.skipped += part.skipped
        result.skipped_empty += part.skipped_empty
        result.messages += part.messages
        result.evicted_messages += part.evicted_messages
        result.conversation_ids += part.conversation_ids
        result.archived_ids += part.archived_ids
        self._seen |= seen
        for name, cid in folders:
            self._folders.setdefault(name, []).append(cid)
        self._projects += placed

    def _heartbeat(self, session: Session) -> None:
        session.execute(update(User).where(User.id == self.owner).values(created_at=self._clock()))

    def finish(self, session: Session) -> ImportResult:
        """Unit: folders and projects found or made, the conversations handed to the user,
        the quotas enforced, the owner gone."""
        user = _live_user(session, self.user_id)
        found: dict[str, str] = {}
        for name, ids in self._folders.items():
            folder_id = _folder_id(session, user, name, found, self.limits, _Batch(session))
            for chunk in _chunks(ids):
                session.execute(
                    update(Conversation)
                    .where(Conversation.id.in_(chunk))
                    .values(folder_id=folder_id)
                )
        try:
            session.execute(
                update(Conversation)
                .where(Conversation.user_id == self.owner)
                .values(user_id=self.user_id)
            )
        except IntegrityError:
            # Only a concurrent import of the same conversations collides on the source keys.
            raise Conflict(
                "Another import of the same conversations is running; try again."
            ) from None
        cache: dict[str, str] = {}
        for item, cid in self._projects:  # PROJ-1: into its project (found or made)
            projects.imported_project(
                session, user, item, cid, limit=self.limits.projects, cache=cache
            )
        user.evicted_messages += self.result.evicted_messages
        evicted = quotas.enforce_conversation_quota(session, user, self.limits)
        session.execute(delete(User).where(User.id == self.owner))
        self.result.evicted = evicted
        return self.result

    def discard(self, units: Units) -> None:
        """Deletes what this import staged, a unit at a time (an import given up)."""
        discard_owner(units, self.owner)


def _chunks(ids: Sequence[str]) -> Iterator[Sequence[str]]:
    for start in range(0, len(ids), _IN_CHUNK):
        yield ids[start : start + _IN_CHUNK]


def _discard_some(session: Session, owner: str) -> bool:
    """Unit: up to :data:`DISCARD_CONVERSATIONS` of ``owner``'s conversations deleted (their
    messages, files and summaries go with them), and the owner once none is left.  True when
    the owner is gone."""
    ids = list(
        session.scalars(
            select(Conversation.id)
            .where(Conversation.user_id == owner)
            .limit(DISCARD_CONVERSATIONS)
        )
    )
    if ids:
        session.execute(delete(Conversation).where(Conversation.id.in_(ids)))
        return False
    session.execute(delete(User).where(User.id == owner, User.name.startswith(STAGING_PREFIX)))
    return True


def discard_owner(units: Units, owner: str) -> None:
    while not units.write(functools.partial(_discard_some, owner=owner)):
        pass


def sweep_stale(units: Units, *, now: datetime | None = None) -> int:
    """Discards what crashed imports left: staging owners silent for :data:`STALE_AFTER`.
    Returns how many there were."""
    cutoff = (now or utcnow()) - STALE_AFTER
    owners = units.read(
        lambda session: list(
            session.scalars(
                select(User.id).where(
                    User.name.startswith(STAGING_PREFIX), User.created_at < cutoff
                )
            )
        )
    )
    for owner in owners:
        log.info("discarding an import left unfinished (staging owner %s)", owner)
        discard_owner(units, owner)
    return len(owners)


def read_prepared(
    source: ImportSource, tokenizers: Collection[str] | None, spool: IO[bytes]
) -> tuple[str, list[tuple[str, str]]]:
    """Step 1, without the database: the whole file sniffed, parsed, validated and counted
    into ``spool`` (read back with :func:`replay`), as ``import_source`` does before its
    transaction.  Returns the format and each conversation's ``(source key, id)``."""
    fmt = sniff(source)
    keys: list[tuple[str, str]] = []
    for conversation in read_conversations(source, fmt):
        keys.append((conversation.source_key, conversation.id))
        pickle.dump(prepare(conversation, tokenizers), spool, protocol=pickle.HIGHEST_PROTOCOL)
    spool.seek(0)
    return fmt, keys


def replay(spool: IO[bytes]) -> Iterator[Prepared]:
    """The conversations :func:`read_prepared` spooled."""
    return _replay(spool)


def _batches(items: Iterator[Prepared], unit_rows: int) -> Iterator[list[Prepared]]:
    """The spool's conversations in lists of about ``unit_rows`` rows."""
    batch: list[Prepared] = []
    rows = 0
    for item in items:
        batch.append(item)
        rows += _rows(item)
        if rows >= unit_rows:
            yield batch
            batch, rows = [], 0
    if batch:
        yield batch


def run_staged(
    units: Units,
    user_id: str,
    source: ImportSource,
    *,
    limits: Limits = UNLIMITED,
    unit_rows: int = UNIT_ROWS,
) -> ImportResult:
    """Imports ``source`` for the user, staged (see the module docstring): all of it, or
    nothing if anything fails.  ``unit_rows``: rows a write unit stops at."""
    tokenizers = units.read(tokenizers_in_use)
    with tempfile.TemporaryFile(prefix="chatmem-import-") as spool:
        fmt, keys = read_prepared(source, tokenizers, spool)
        sweep_stale(units)
        staged = StagedImport(user_id, fmt, keys, limits=limits, unit_rows=unit_rows)
        units.read(staged.look_up)
        try:
            units.write(staged.begin)
            for batch in _batches(replay(spool), unit_rows):
                while batch:
                    taken = units.write(functools.partial(staged.write, items=batch))
                    batch = batch[taken:]
            return units.write(staged.finish)
        except BaseException:
            if staged.begun:
                try:
                    staged.discard(units)
                except Exception:  # the sweep at the next import or start finishes it
                    log.exception("could not discard a failed import's staged rows")
            raise
