"""Write imported conversations into the store: one transaction, no duplicates (STORE-5).

:func:`import_conversations` runs inside the caller's session and never commits: the caller's
unit of work (``Database.session()`` or the request's ``DbSession``) commits when everything
went in and rolls back on the first error, so a bad conversation in the middle of a file
leaves the database exactly as it was.  Rows go in with Core ``INSERT``s in batches (no ORM
identity map growing with the file), and memory stays bounded by one conversation plus a
batch of rows.

Duplicates: every imported conversation records its ``source`` key (``chatgpt:<id>``,
``chatmem:<id>`` …; unique per user).  A key already present — or, for a chatmem export, the
user's own conversation with that id — is skipped and counted.  A foreign conversation with
no message left (blanked in the source app, or only tool traffic) is skipped and counted
apart (``skipped_empty``); a chatmem export keeps even an empty conversation (lossless).

Ids: a chatmem export keeps its conversation, message and file ids when they are all of
chatmem's own form and free (a lossless round trip to another server); when any is taken (the
same file imported by another user) or of another form (a hand-written file's ``c1``, a path)
the whole conversation gets fresh ids, remapped consistently in summaries and files.  The
source key keeps the file's own id, so importing the file again still skips it.
Foreign exports always get fresh ids.  Token counts are computed here, at write time, with
the storage core's counters (CTX-2), and quotas are enforced as for any new conversation.
"""

from __future__ import annotations

import pickle
import tempfile
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import IO, Any

from sqlalchemy import Engine, insert, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from chatmem.context.values import Message as EngineMessage
from chatmem.errors import Conflict, ImportFormatError, TooLarge
from chatmem.formats.images import FORMATS, image_size
from chatmem.formats.reader import read_conversations, sniff
from chatmem.formats.records import ImportedConversation
from chatmem.formats.source import ImportSource, Progress
from chatmem.store import projects, quotas
from chatmem.store.accounts import Account
from chatmem.store.conversations import create_folder
from chatmem.store.history_keys import key_rows
from chatmem.store.images import add_image
from chatmem.store.pinned_facts import fact_block
from chatmem.store.quotas import UNLIMITED, Limits
from chatmem.store.search import insert_messages
from chatmem.store.tables.conversations import (
    Conversation,
    File,
    Folder,
    Message,
    MessageVersion,
    Summary,
)
from chatmem.store.tables.history_keys import HistoryKey
from chatmem.store.tables.pinned_facts import PinnedFactBlockRow, PinnedFactRow
from chatmem.store.token_counts import (
    counts_for_message,
    counts_for_text,
    tokenizers_in_use,
    with_fresh_estimate,
)
from chatmem.store.types import is_own_id, new_id, new_ids, utcnow

BATCH = 2_000
IMAGE_TYPES = frozenset(FORMATS.values())


def clean(text: str) -> str:
    """JSON allows ``\u0000`` but PostgreSQL text cannot hold it; keep both backends equal."""
    return text.replace("\x00", "\ufffd") if "\x00" in text else text


@dataclass
class ImportResult:
    format: str = ""
    imported: int = 0  # conversations created
    skipped: int = 0  # already present (same source key)
    skipped_empty: int = 0  # foreign conversations with no text at all (blanked, never used)
    messages: int = 0
    evicted: int = 0  # conversations removed by the conversation quota (STORE-4)
    evicted_messages: int = 0  # oldest messages removed by the message quota
    conversation_ids: list[str] = field(default_factory=list)
    # Imported conversations that were archived where they came from; the caller archives
    # them again after the import committed (archiving writes files and commits on its own).
    archived_ids: list[str] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return {
            "format": self.format,
            "imported": self.imported,
            "skipped": self.skipped,
            "skipped_empty": self.skipped_empty,
            "messages": self.messages,
            "evicted": self.evicted,
            "evicted_messages": self.evicted_messages,
            "conversation_ids": self.conversation_ids,
            "archived": len(self.archived_ids),
        }


class _Batch:
    """Pending Core inserts, flushed table by table in dependency order."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.rows: dict[Any, list[dict[str, Any]]] = {
            Conversation: [],
            Message: [],
            Summary: [],
            File: [],
            MessageVersion: [],
            HistoryKey: [],
            PinnedFactRow: [],
            PinnedFactBlockRow: [],
        }
        self.size = 0
        # Ids written by this import that may still sit in the batch (not yet in the table).
        self.ids: set[str] = set()

    def add(self, table: Any, row: dict[str, Any]) -> None:
        self.rows[table].append(row)
        if "id" in row and table not in (Summary, MessageVersion, HistoryKey):
            self.ids.add(row["id"])
        self.size += 1
        if self.size >= BATCH:
            self.flush()

    def flush(self) -> None:
        connection = self.session.connection()
        tables = (Conversation, Message, Summary, File, MessageVersion, HistoryKey)
        for table in (*tables, PinnedFactRow, PinnedFactBlockRow):  # keys first
            rows = self.rows[table]
            if not rows:
                continue
            if table is Message:  # with the full-text index filled in one statement
                insert_messages(connection, rows)
            else:
                connection.execute(insert(table), rows)
            rows.clear()
        self.size = 0


def import_conversations(
    session: Session,
    user: Account,
    conversations: Iterable[ImportedConversation | Prepared],
    *,
    fmt: str = "",
    limits: Limits = UNLIMITED,
    present: Collection[str] | None = None,
) -> ImportResult:
    r"""Store every new conversation of ``conversations`` (plain, or :func:`prepare`\ d with
    their token counts); the caller commits.  ``present``: the source keys among them
    already there (:func:`already_present`, read in a few statements), else each
    conversation is looked up when its turn comes."""
    result = ImportResult(format=fmt)
    batch = _Batch(session)
    folders: dict[str, str] = {}
    project_ids: dict[str, str] = {}
    seen: set[str] = set()
    for item in conversations:
        conversation, counted = item if isinstance(item, tuple) else (item, None)
        if fmt != "chatmem" and not conversation.messages:
            result.skipped_empty += 1  # nothing a user could read: no empty "Imported" entry
            continue
        if conversation.source_key in seen or (
            conversation.source_key in present
            if present is not None
            else _already_there(session, user, conversation)
        ):
            result.skipped += 1
            continue
        seen.add(conversation.source_key)
        folder_id = _folder_id(session, user, conversation.folder, folders, limits, batch)
        cid = _write(
            session,
            user,
            conversation,
            folder_id,
            batch,
            fresh_ids=fmt != "chatmem",
            counted=counted,
        )
        if conversation.extra.get("project"):  # PROJ-1: into its project (found or made)
            batch.flush()
            projects.imported_project(
                session,
                user,
                conversation.extra["project"],
                cid,
                limit=limits.projects,
                cache=project_ids,
            )
        result.imported += 1
        result.messages += len(conversation.messages)
        result.conversation_ids.append(cid)
        if conversation.archived:
            result.archived_ids.append(cid)
    batch.flush()
    session.flush()
    if limits.messages is not None:
        for cid in result.conversation_ids:
            result.evicted_messages += quotas.enforce_message_quota(session, user, cid, limits)
    result.evicted = quotas.enforce_conversation_quota(session, user, limits)
    return result


def _already_there(session: Session, user: Account, conversation: ImportedConversation) -> bool:
    key = conversation.source_key
    found = session.scalar(
        select(Conversation.id).where(Conversation.user_id == user.id, Conversation.source == key)
    )
    if found is not None:
        return True
    if key.startswith("chatmem:"):  # the user's own conversation, exported and brought back
        owner = session.scalar(
            select(Conversation.user_id).where(Conversation.id == conversation.id)
        )
        return owner == user.id
    return False


#: Source keys (or ids) looked up per statement by :func:`already_present`.
LOOKUP_CHUNK = 500


def already_present(session: Session, user: Account, keys: Iterable[tuple[str, str]]) -> set[str]:
    """The source keys of ``keys`` (``(source_key, conversation id)`` pairs) that
    :func:`_already_there` would find, in a statement per :data:`LOOKUP_CHUNK`: the user's
    conversations with that source, and for a chatmem export the user's own conversation
    with that id."""
    found: set[str] = set()
    pairs = list(keys)
    for start in range(0, len(pairs), LOOKUP_CHUNK):
        chunk = pairs[start : start + LOOKUP_CHUNK]
        found.update(
            session.scalars(
                select(Conversation.source).where(
                    Conversation.user_id == user.id,
                    Conversation.source.in_({key for key, _ in chunk}),
                )
            )
        )
        native = {cid: key for key, cid in chunk if key.startswith("chatmem:")}
        if native:
            owned = session.scalars(
                select(Conversation.id).where(
                    Conversation.user_id == user.id, Conversation.id.in_(native)
                )
            )
            found.update(native[cid] for cid in owned)
    return found


def _folder_id(
    session: Session,
    user: Account,
    name: str | None,
    cache: dict[str, str],
    limits: Limits,
    batch: _Batch,
) -> str | None:
    if name is None or not name.strip():
        return None
    name = name.strip()
    if name not in cache:
        found = session.scalar(
            select(Folder.id).where(Folder.user_id == user.id, Folder.name == name).limit(1)
        )
        if found is None:
            batch.flush()
            found = create_folder(session, user, name, limits).id
        cache[name] = found
    return cache[name]


def _ids_free(session: Session, model: Any, ids: list[str], pending: set[str]) -> bool:
    """Whether every id of ``ids`` may be kept: of chatmem's own form (an id from a file is
    never trusted as a name — an archive's file is named by its conversation's id) and
    neither stored nor taken earlier in this import."""
    if any(not is_own_id(i) or i in pending for i in ids):
        return False
    for start in range(0, len(ids), 500):
        chunk = ids[start : start + 500]
        if session.scalar(select(model.id).where(model.id.in_(chunk)).limit(1)) is not None:
            return False
    return True


def _id_map(
    session: Session, conversation: ImportedConversation, batch: _Batch, fresh: bool
) -> tuple[str, dict[str, str], dict[str, str]]:
    """The conversation id and message/file id maps: originals when all free, else fresh."""
    message_ids = [m.id for m in conversation.messages]
    file_ids = [f.id for f in conversation.files]
    if not fresh and conversation.id:
        pending = batch.ids  # this import's own ids, flushed or not
        if (
            _ids_free(session, Conversation, [conversation.id], pending)
            and _ids_free(session, Message, message_ids, pending)
            and _ids_free(session, File, file_ids, pending)
        ):
            return conversation.id, {i: i for i in message_ids}, {i: i for i in file_ids}
    return (
        new_id(),
        dict(zip(message_ids, new_ids(len(message_ids)), strict=True)),
        dict(zip(file_ids, new_ids(len(file_ids)), strict=True)),
    )


def _by_seq(row: dict[str, Any]) -> int:
    return int(row["seq"])


def _write(
    session: Session,
    user: Account,
    conversation: ImportedConversation,
    folder_id: str | None,
    batch: _Batch,
    *,
    fresh_ids: bool,
    counted: Mapping[str, Mapping[str, Any]] | None = None,
) -> str:
    cid, mids, fids = _id_map(session, conversation, batch, fresh_ids)
    now = utcnow()
    times = [m.created_at for m in conversation.messages if m.created_at is not None]
    created = conversation.created_at or (min(times) if times else now)
    updated = conversation.updated_at or (max(times) if times else created)
    meta: dict[str, Any] = {}
    if conversation.profile:
        meta["profile"] = dict(conversation.profile)
    facts = fact_rows(conversation, cid, mids, now)
    batch.add(
        Conversation,
        {
            "id": cid,
            "user_id": user.id,
            "title": clean(conversation.title)[:500],
            "folder_id": folder_id,
            "pinned": conversation.pinned,
            "mode": conversation.mode or "full",
            "profile_id": None,
            "instructions": str(conversation.extra.get("instructions", "")),
            "recall": conversation.extra.get("recall"),  # issue 17
            "source": conversation.source_key[:300],
            "created_at": created,
            "updated_at": updated,
            "last_active_at": max([updated, *times]),
            "archived_at": None,
            "meta": meta or None,
            "has_pinned_facts": bool(facts),  # CTX-24
        },
    )
    rows = sorted(message_rows(conversation, cid, mids, now, cached=counted), key=_by_seq)
    for row in rows:
        batch.add(Message, row)
    for row in key_rows(user.id, cid, rows):  # API-1: an OpenAI client may continue it
        batch.add(HistoryKey, row)
    for row in summary_rows(conversation, cid, mids, now):
        batch.add(Summary, row)
    for row in version_rows(conversation, cid, mids, now):
        batch.add(MessageVersion, row)
    for table, row in facts:
        batch.add(table, row)
    images = []
    for row in file_rows(conversation, cid, mids, fids, now):
        if fresh_ids and row["data"] is not None and row["mime"] in IMAGE_TYPES:
            images.append(row)  # a foreign export's image: stored as any image is, below
        else:
            batch.add(File, row)
    if images:
        _add_images(session, user, cid, images, updated, batch)
    return cid


def _add_images(
    session: Session,
    user: Account,
    cid: str,
    rows: list[dict[str, Any]],
    updated: Any,
    batch: _Batch,
) -> None:
    """Images an export held the bytes of (a ChatGPT ZIP, Open WebUI's inline ones) go in
    through :func:`~chatmem.store.images.add_image`, like an upload: the bytes checked, the
    size in pixels kept for the plan.  The rows it needs are written first; the
    conversation keeps its own time (adding an image would make it "updated now")."""
    batch.flush()
    for row in rows:
        add_image(
            session,
            user_id=user.id,
            conversation_id=cid,
            message_id=row["message_id"],
            filename=row["name"],
            data=row["data"],
        )
    session.execute(update(Conversation).where(Conversation.id == cid).values(updated_at=updated))
    found = session.get(Conversation, cid)
    if found is not None:  # add_image loaded it: not kept in the session for the whole import
        session.expunge(found)


def message_rows(
    conversation: ImportedConversation,
    cid: str,
    mids: dict[str, str],
    now: Any,
    *,
    cached: Mapping[str, Mapping[str, Any]] | None = None,
) -> Iterator[dict[str, Any]]:
    """Insert rows for the messages.  ``cached`` (by original message id: ``tokens``,
    ``seq``, ``meta``) is trusted stored state — only our own hash-checked archives pass it
    (their estimate is counted again) — or ``counted``, the counts :func:`prepare` just
    computed; everything else is numbered and counted here."""
    cached = cached or {}
    for seq, message in enumerate(conversation.messages, start=1):
        kept = cached.get(message.id) or {}
        mid = mids[message.id]
        content = clean(message.content)
        counts = kept.get("counted")  # by prepare(), moments ago: as they are
        if not counts:  # counted here (the engine's value of the message is only for that)
            value = EngineMessage(
                id=mid,
                role=message.role,
                content=content,
                tool_calls=message.tool_calls,
                tool_call_id=message.tool_call_id,
            )
            counts = (
                with_fresh_estimate(kept["tokens"], value)
                if kept.get("tokens")
                else counts_for_message(value)
            )
        yield {
            "id": mid,
            "conversation_id": cid,
            "seq": kept.get("seq") or seq,
            "role": message.role,
            "content": content,
            "created_at": message.created_at or now,
            "tool_calls": [
                {"id": c.id, "name": c.name, "arguments": c.arguments} for c in message.tool_calls
            ]
            or None,
            "tool_call_id": message.tool_call_id,
            "excluded": message.excluded,
            "hidden": message.hidden,
            "meta": kept.get("meta")
            or ({"reasoning": message.reasoning} if message.reasoning else None),
            **counts,
        }


def version_rows(
    conversation: ImportedConversation, cid: str, mids: dict[str, str], now: Any
) -> Iterator[dict[str, Any]]:
    """PROJ-3: insert rows for the versions of answers and questions (ids mapped as the
    messages' are)."""
    for version in conversation.versions:
        slot = str(version["slot"])
        yield {
            "id": new_id(),
            "conversation_id": cid,
            "kind": version["kind"],
            "slot": mids.get(slot, slot),
            "number": int(version["number"]),
            "shown": bool(version.get("shown", False)),
            "message_ids": [mids[m] for m in version.get("message_ids", []) if m in mids],
            "created_at": now,
        }


def summary_rows(
    conversation: ImportedConversation, cid: str, mids: dict[str, str], now: Any
) -> Iterator[dict[str, Any]]:
    position = {m.id: index for index, m in enumerate(conversation.messages)}
    first = conversation.messages[0].id if conversation.messages else None
    versions: set[int] = set()
    for summary in conversation.summaries:
        version = summary.version
        while version in versions:  # a hand-written export may repeat versions
            version += 1
        versions.add(version)
        through = summary.through  # None: carried from another conversation (CTX-23)
        yield {
            "id": new_id(),
            "conversation_id": cid,
            "version": version,
            "first_message_id": mids[first] if first and through is not None else None,
            "through_message_id": mids[through] if through is not None else None,
            "message_count": position[through] + 1 if through is not None else 0,
            "text": clean(summary.text),
            "focus": summary.focus,
            "cost": float(summary.cost or 0.0),
            "model": summary.model,
            "created_at": summary.created_at or now,
            **counts_for_text(summary.text),
        }


def fact_rows(
    conversation: ImportedConversation, cid: str, mids: dict[str, str], now: Any
) -> list[tuple[Any, dict[str, Any]]]:
    """CTX-24: the pinned facts (fresh ids, oldest first) and the one message they are sent
    as, counted; a message id not in the file (the message was deleted) is not kept.  Facts
    past the token bound refuse the file, naming the conversation."""
    facts = conversation.extra.get("facts") or ()
    if not facts:
        return []
    texts = [clean(f["text"]) for f in facts]
    try:
        block, counts = fact_block(texts)
    except TooLarge as exc:
        raise ImportFormatError(
            f"conversation {conversation.id!r}: {exc.message}", **exc.data
        ) from None
    rows: list[tuple[Any, dict[str, Any]]] = []
    stamp = None
    for text, fact in zip(texts, facts, strict=True):
        # The file's order is the facts' order: their times increase, a microsecond apart
        # where the file gives none or the same.
        created = fact["created_at"] or now
        if stamp is not None and created <= stamp:
            created = stamp + timedelta(microseconds=1)
        stamp = created
        row = {
            "id": new_id(),
            "conversation_id": cid,
            "text": text,
            "message_id": mids.get(fact["message_id"] or ""),
            "created_at": created,
            "updated_at": created,
        }
        rows.append((PinnedFactRow, row))
    rows.append((PinnedFactBlockRow, {"conversation_id": cid, "text": block, **counts}))
    return rows


def file_rows(
    conversation: ImportedConversation,
    cid: str,
    mids: dict[str, str],
    fids: dict[str, str],
    now: Any,
) -> Iterator[dict[str, Any]]:
    for item in conversation.files:
        width, height = image_size(item.data, item.mime)  # PROJ-2: read from the bytes again
        yield {
            "id": fids[item.id],
            "conversation_id": cid,
            "message_id": mids[item.message_id] if item.message_id else None,
            "name": (clean(item.name).strip() or "file.txt")[:500],
            "content": clean(item.content),
            "state": item.state,
            "size": len(item.data) if item.data is not None else len(item.content.encode("utf-8")),
            "created_at": item.created_at or now,
            "mime": item.mime,
            "data": item.data,
            "width": width,
            "height": height,
            **counts_for_text(item.content),
        }


# A conversation with the token counts of its messages (by source message id), computed
# before the import takes the database's write lock.
Prepared = tuple[ImportedConversation, dict[str, dict[str, Any]]]


def prepare(
    conversation: ImportedConversation, tokenizers: Collection[str] | None = None
) -> Prepared:
    """The conversation with its messages' counts: the estimate and ``tokenizers`` (the ones
    profiles use; every one when ``None``), the others left to count when first planned."""
    counts = {
        m.id: {
            "counted": counts_for_message(
                EngineMessage(
                    id=m.id,
                    role=m.role,
                    content=clean(m.content),
                    tool_calls=m.tool_calls,
                    tool_call_id=m.tool_call_id,
                ),
                tokenizers,
            )
        }
        for m in conversation.messages
    }
    return conversation, counts


def _replay(spool: IO[bytes]) -> Iterator[Prepared]:
    """Our own spool, written moments ago by this process (never user-supplied pickles)."""
    while True:
        try:
            yield pickle.load(spool)
        except EOFError:
            return


def import_source(
    session: Session,
    user: Account,
    source: ImportSource,
    *,
    limits: Limits = UNLIMITED,
    on_progress: Progress | None = None,
    on_saving: Callable[[], None] | None = None,
) -> ImportResult:
    """Sniff, stream and store a whole file in the caller's transaction (all or nothing).

    Two phases keep the database's write lock short (SQLite has one writer): first the file
    is parsed, validated and token-counted into a temporary spool without touching the
    database — a malformed file is refused here, before any lock — then the spool is
    replayed into the database.  ``on_saving`` marks the switch (progress bars)."""
    fmt = sniff(source)
    # Read on a connection of its own: the caller's transaction starts with the first row.
    bind = session.get_bind()
    if isinstance(bind, Engine):
        with bind.connect() as connection:
            tokenizers = tokenizers_in_use(connection)
    else:
        tokenizers = tokenizers_in_use(bind)
    keys: list[tuple[str, str]] = []  # looked up together once the transaction starts
    with tempfile.TemporaryFile(prefix="chatmem-import-") as spool:
        for conversation in read_conversations(source, fmt, on_progress):
            keys.append((conversation.source_key, conversation.id))
            pickle.dump(prepare(conversation, tokenizers), spool, protocol=pickle.HIGHEST_PROTOCOL)
        if on_saving is not None:
            on_saving()
        spool.seek(0)
        try:
            present = already_present(session, user, keys)
            return import_conversations(
                session, user, _replay(spool), fmt=fmt, limits=limits, present=present
            )
        except IntegrityError:
            # Only a concurrent import of the same conversations collides on the source keys.
            raise Conflict(
                "Another import of the same conversations is running; try again."
            ) from None
