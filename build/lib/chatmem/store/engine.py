"""From rows to the engine's values, loading only what a plan touches.

:func:`load_engine_conversation` returns a :class:`chatmem.context.Conversation` whose
``messages`` is a :class:`LazyMessages` sequence: its length comes from ``min(seq)``/``max(seq)``
(two index probes) and items are fetched from the database on first access in pages counted
from the newest message, doubling in size going back (:data:`PAGE_SIZE` first), so a plan
that walks only the recent tail of a 10,000-message conversation reads one or two small
pages, not the history.  It relies on the
``seq`` invariant in :mod:`chatmem.store.messages` (contiguous but for a deleted prefix and
the hidden versions, whose few seqs it reads and skips, PROJ-3) and falls back to an explicit seq list if it ever finds a gap.  The sequence reads through the
session's (or the given) connection: plan while that transaction is open.

Each message carries the cached token count for the profile's tokenizer (CTX-2), scaled by
the profile's calibration factor when there is one (:class:`Scale`: a count cached when the
message was stored is the raw count; the calibration learnt from the provider's reports, or
from a context-length error naming the real count, PROV-2, applies to it as to any new
text — so history is never counted with less than the provider counts).  Every
statement here is built once with bind parameters and run on the Core connection: the loader
runs at every turn step and every keystroke of the context endpoint, and building a
statement costs SQLAlchemy more than SQLite takes to answer it.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import cache
from typing import Any, overload

from sqlalchemy import BigInteger, Connection, bindparam, cast, false, func, select, true
from sqlalchemy.orm import Session, aliased

from chatmem.context.values import AppContext as EngineAppContext
from chatmem.context.values import Conversation as EngineConversation
from chatmem.context.values import File as EngineFile
from chatmem.context.values import Message as EngineMessage
from chatmem.context.values import PinnedFacts as EnginePinnedFacts
from chatmem.context.values import Summary as EngineSummary
from chatmem.context.values import ToolCall
from chatmem.store import projects
from chatmem.store.db import connection_of
from chatmem.store.fact_records import read_record
from chatmem.store.profiles import PROFILE_COLUMNS, ProfileRecord, profile_from_columns
from chatmem.store.tables.accounts import User
from chatmem.store.tables.app_context import AppContextRow
from chatmem.store.tables.conversations import Conversation, File, Message, Summary
from chatmem.store.tables.pinned_facts import PinnedFactBlockRow
from chatmem.store.tables.profiles import McpServer, ModelProfile
from chatmem.store.tables.projects import Project
from chatmem.store.tables.runs import UsageRow
from chatmem.store.token_counts import column_for, fill_uncounted

PAGE_SIZE = 32  # the newest page; older pages double in size
#: The rows the partial index ``ix_messages_hidden`` covers (the same expression as its
#: WHERE, so both databases use it), and the rest: what the engine sees.
HIDDEN = Message.hidden == true()
SHOWN = Message.hidden == false()


@dataclass(frozen=True)
class Scale:
    """A calibration factor as an exact ratio ``num / DEN`` (rounded up), applied to cached
    counts as ``ceil(tokens * num / DEN)`` — in Python per message and in SQL for a backlog's
    sum, with the same integers, so both agree to the token."""

    num: int = 1000

    DEN = 1000

    @classmethod
    def of(cls, factor: float) -> Scale:
        if not math.isfinite(factor) or factor <= 1.0:
            return cls()
        return cls(math.ceil(factor * cls.DEN))

    @property
    def identity(self) -> bool:
        return self.num == self.DEN

    def apply(self, tokens: int | None) -> int | None:
        if tokens is None or self.identity:
            return tokens
        return (tokens * self.num + self.DEN - 1) // self.DEN


NO_SCALE = Scale()


def _message_value(row: Any, tokens_column: str, scale: Scale = NO_SCALE) -> EngineMessage:
    return EngineMessage(
        id=row.id,
        role=row.role,
        content=row.content,
        tokens=scale.apply(getattr(row, tokens_column)),
        excluded=bool(row.excluded),
        tool_calls=tuple(
            ToolCall(id=c["id"], name=c["name"], arguments=c.get("arguments", "{}"))
            for c in (row.tool_calls or ())
        ),
        tool_call_id=row.tool_call_id,
        at=row.created_at,
    )


# The loader's statements are built once: building one costs SQLAlchemy more than SQLite
# takes to answer it, and they run on every keystroke (the context endpoint) and every turn.


def message_bounds(conversation_id: Any) -> tuple[Any, Any, Any]:
    """The first and last ``seq`` of a conversation's history and how many of its messages
    are hidden versions (PROJ-3), as three columns (``first_seq``, ``last_seq``,
    ``hidden_count``) to select.  Scalar subqueries, not ``min(seq), max(seq)`` in one
    SELECT: SQLite answers a lone min() or max() with one index probe but scans the whole
    range for the pair; the count walks the partial index of hidden rows only."""
    scope = Message.conversation_id == conversation_id
    return (
        select(func.min(Message.seq)).where(scope).scalar_subquery().label("first_seq"),
        select(func.max(Message.seq)).where(scope).scalar_subquery().label("last_seq"),
        select(func.count())
        .select_from(Message)
        .where(scope, HIDDEN)
        .scalar_subquery()
        .label("hidden_count"),
    )


_BOUNDS = select(*message_bounds(bindparam("cid")))


def conversation_extras(conversation_id: Any) -> tuple[Any, Any]:
    """Whether a conversation has a summary and files, as two columns (``summaries``,
    ``files``: counts) to select with its row — a short conversation has neither, and then
    :func:`load_engine_conversation` need not ask."""
    return (
        select(func.count(Summary.id))
        .where(Summary.conversation_id == conversation_id)
        .scalar_subquery()
        .label("summaries"),
        select(func.count(File.id))
        .where(File.conversation_id == conversation_id)
        .scalar_subquery()
        .label("files"),
    )


_LATEST_SUMMARY = (
    select(Summary.__table__)
    .where(Summary.conversation_id == bindparam("cid"))
    .order_by(Summary.version.desc())
    .limit(1)
)
_FILES = (
    # every column but a binary attachment's bytes (PROV-4: never sent, never loaded here)
    select(*(column for column in File.__table__.c if column.name != "data"))
    .where(File.conversation_id == bindparam("cid"))
    .order_by(File.created_at, File.id)
)
_POSITION = select(Message.seq, Message.hidden).where(
    Message.id == bindparam("mid"), Message.conversation_id == bindparam("cid")
)
_HIDDEN_SEQS = (
    select(Message.seq)
    .where(Message.conversation_id == bindparam("cid"), HIDDEN)
    .order_by(Message.seq)
)


@cache
def _token_sum_statement(tokens_column: str, scaled: bool = False) -> Any:
    column: Any = getattr(Message, tokens_column)
    if scaled:
        # Scale.apply per row, in integers (both dialects divide integers exactly so).
        column = (
            cast(column, BigInteger) * bindparam("num", type_=BigInteger) + (Scale.DEN - 1)
        ) // Scale.DEN
    return select(func.coalesce(func.sum(column), 0)).where(
        Message.conversation_id == bindparam("cid"),
        Message.seq >= bindparam("low"),
        Message.seq < bindparam("high"),
        SHOWN,
    )


@cache
def _page_columns(tokens_column: str) -> tuple[Any, ...]:
    return (
        Message.id,
        Message.seq,
        Message.role,
        Message.content,
        getattr(Message, tokens_column),
        Message.excluded,
        Message.tool_calls,
        Message.tool_call_id,
        Message.created_at,
    )


@cache
def _page_statement(tokens_column: str) -> Any:
    return (
        select(*_page_columns(tokens_column))
        .where(
            Message.conversation_id == bindparam("cid"),
            Message.seq >= bindparam("low"),
            Message.seq < bindparam("high"),
            SHOWN,
        )
        .order_by(Message.seq)
    )


class LazyMessages(Sequence[EngineMessage]):
    """A read-only, page-cached view of one conversation's messages, oldest first.

    Hidden versions (PROJ-3) are not in it: their few ``seq`` numbers are read once (only
    when the conversation has any) and skipped by arithmetic, so index ``i`` is still one
    ``seq`` away without reading the rows in between."""

    def __init__(
        self,
        session: Session | Connection,
        conversation_id: str,
        tokens_column: str,
        page_size: int = PAGE_SIZE,
        bounds: tuple[int | None, int | None, int | None] | None = None,
        scale: Scale = NO_SCALE,
    ) -> None:
        self._connection = connection_of(session)  # statements run straight on the connection
        self._conversation_id = conversation_id
        self._tokens_column = tokens_column
        self._scale = scale
        self._page_size = page_size
        self._pages: dict[int, list[EngineMessage]] = {}
        self._seqs: list[int] | None = None  # only after a gap was found
        if bounds is None:
            bounds = self._connection.execute(_BOUNDS, {"cid": conversation_id}).one()
        first, last, hidden_count = bounds
        #: The hidden versions' seqs, ascending (PROJ-3): skipped by :meth:`_seq_of`.
        self._hidden: list[int] = (
            list(self._connection.scalars(_HIDDEN_SEQS, {"cid": conversation_id}))
            if hidden_count is None or hidden_count > 0
            else []
        )
        self._first = first or 1
        self._length = 0 if first is None or last is None else last - first + 1 - len(self._hidden)
        self.pages_loaded = 0

    def _seq_of(self, index: int) -> int:
        """The ``seq`` of the shown message at ``index`` (no gap but the hidden ones)."""
        seq = self._first + index
        for hidden in self._hidden:  # ascending: each one at or before it moves it on
            if hidden > seq:
                break
            seq += 1
        return seq

    def _range(self, start: int, stop: int) -> dict[str, Any]:
        """The seq bounds ``low``/``high`` of the shown messages ``start`` to ``stop``."""
        return {
            "cid": self._conversation_id,
            "low": self._seq_of(start),
            "high": self._seq_of(stop - 1) + 1,
        }

    def __len__(self) -> int:
        return self._length

    def _columns(self) -> tuple[Any, ...]:
        return _page_columns(self._tokens_column)

    # Pages are counted from the newest message and double in size going back (32, 64, 128 …
    # with the default first page): a plan that needs the last 40 messages converts ~100 rows,
    # one that walks far back still needs only O(log n) queries.

    def _page_of(self, index: int) -> int:
        from_end = self._length - 1 - index
        return (from_end // self._page_size + 1).bit_length() - 1

    def _bounds(self, page: int) -> tuple[int, int]:
        stop = self._length - self._page_size * ((1 << page) - 1)
        start = max(0, self._length - self._page_size * ((1 << (page + 1)) - 1))
        return start, stop

    def _load_page(self, page: int) -> list[EngineMessage]:
        start, stop = self._bounds(page)
        if self._seqs is None:
            rows = self._connection.execute(
                _page_statement(self._tokens_column), self._range(start, stop)
            ).all()
        else:
            stmt = select(*self._columns()).where(
                Message.conversation_id == self._conversation_id,
                Message.seq.in_(self._seqs[start:stop]),
                SHOWN,
            )
            rows = self._connection.execute(stmt.order_by(Message.seq)).all()
        self.pages_loaded += 1
        if len(rows) != stop - start and self._seqs is None:
            self._use_explicit_seqs()
            return self._load_page(page)
        return [_message_value(r, self._tokens_column, self._scale) for r in rows]

    def _use_explicit_seqs(self) -> None:
        self._seqs = list(
            self._connection.scalars(
                select(Message.seq)
                .where(Message.conversation_id == self._conversation_id, SHOWN)
                .order_by(Message.seq)
            )
        )
        self._length = len(self._seqs)
        self._pages.clear()

    def _page(self, page: int) -> list[EngineMessage]:
        cached = self._pages.get(page)
        if cached is None:
            cached = self._pages[page] = self._load_page(page)
        return cached

    @overload
    def __getitem__(self, index: int) -> EngineMessage: ...

    @overload
    def __getitem__(self, index: slice) -> list[EngineMessage]: ...

    def __getitem__(self, index: int | slice) -> EngineMessage | list[EngineMessage]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(self._length))]
        if index < 0:
            index += self._length
        if not 0 <= index < self._length:
            raise IndexError(index)
        page = self._page_of(index)
        return self._page(page)[index - self._bounds(page)[0]]

    def __iter__(self) -> Iterator[EngineMessage]:
        i = 0
        while i < self._length:  # re-read: finding a gap shortens the sequence
            yield self[i]
            i += 1

    def __reversed__(self) -> Iterator[EngineMessage]:
        for i in range(self._length - 1, -1, -1):
            yield self[i]

    def position_of(self, message_id: str) -> int | None:
        """Index of a message id, by one indexed lookup instead of a scan."""
        row = self._connection.execute(
            _POSITION, {"mid": message_id, "cid": self._conversation_id}
        ).first()
        if row is None or row.hidden:
            return None
        seq: int = row.seq
        if self._seqs is not None:
            return self._seqs.index(seq)
        return seq - self._first - bisect.bisect_left(self._hidden, seq)

    # The engine's ``CountedHistory`` protocol (chatmem.context.history): a long backlog's size
    # and the summary's position come from the index, not from loading every message.
    index_of = position_of

    def tokens_between(self, start: int, stop: int) -> int:
        """Sum of the cached counts of ``self[start:stop]``, by one indexed aggregate."""
        start, stop = max(0, start), min(stop, self._length)
        if stop <= start:
            return 0
        if self._seqs is not None:
            return sum(message.tokens or 0 for message in self[start:stop])
        scaled = not self._scale.identity
        params: dict[str, Any] = self._range(start, stop)
        if scaled:
            params["num"] = self._scale.num
        return int(
            self._connection.execute(
                _token_sum_statement(self._tokens_column, scaled), params
            ).scalar()
            or 0
        )

    def index(self, value: Any, start: int = 0, stop: int | None = None) -> int:
        if isinstance(value, EngineMessage):
            found = self.position_of(value.id)
            if found is not None and self[found] == value:
                stop = self._length if stop is None else stop
                if start <= found < stop:
                    return found
        raise ValueError("message not in conversation")


@dataclass(frozen=True, slots=True)
class StepConversation:
    """What a model step reads about its conversation, in one statement
    (:func:`step_conversation`): its own columns, where its history starts and ends, whether
    it has a summary or files, how many MCP servers are enabled, and its model profile."""

    user_id: str
    profile_id: str | None
    mode: str
    instructions: str
    archived_at: datetime | None
    first_seq: int | None
    last_seq: int | None
    #: How many of its messages are hidden versions (PROJ-3).
    hidden_count: int
    summaries: int
    files: int
    mcp_servers: int
    #: Issue 17: the conversation's recall switch (None: the profile's, else the mode's).
    recall: bool | None
    #: The conversation's profile as stored (None: it has none, or it is gone).  Whether its
    #: owner may still use it is the caller's check (:meth:`ProfileRecord.visible_to`).
    profile: ProfileRecord | None
    #: PROJ-1: the project whose instructions and files the conversation carries.
    project_id: str | None = None
    #: USE-2: the owner's own included usage (session, week) where an administrator set it.
    own_limits: tuple[float | None, float | None] = (None, None)
    #: APPS-3: whether an app set a model context (read only then).
    app_context: bool = False
    #: CTX-24: whether the user pinned facts (read only then).
    pinned_facts: bool = False


_STEP = (
    select(
        Conversation.user_id,
        Conversation.profile_id,
        Conversation.mode,
        Conversation.instructions,
        Conversation.archived_at,
        Conversation.recall,
        Conversation.project_id,
        Conversation.has_app_context,
        Conversation.has_pinned_facts,
        User.session_limit_usd,
        User.week_limit_usd,
        *message_bounds(bindparam("cid")),
        *conversation_extras(bindparam("cid")),
        select(func.count(McpServer.id))
        .where(McpServer.enabled.is_(True))
        .scalar_subquery()
        .label("mcp_servers"),
        # The conversation's profile, read with it (``p_`` + the profile's column names).
        *(column.label(f"p_{column.key}") for column in PROFILE_COLUMNS),
    )
    .join(User, User.id == Conversation.user_id)
    .outerjoin(ModelProfile, ModelProfile.id == Conversation.profile_id)
    .where(Conversation.id == bindparam("cid"))
)


def step_conversation(
    session: Session | Connection, conversation_id: str
) -> StepConversation | None:
    """The conversation as a model step reads it (None for an unknown id)."""
    row = connection_of(session).execute(_STEP, {"cid": conversation_id}).first()
    if row is None:
        return None
    return StepConversation(
        user_id=row.user_id,
        profile_id=row.profile_id,
        mode=row.mode,
        instructions=row.instructions,
        archived_at=row.archived_at,
        first_seq=row.first_seq,
        last_seq=row.last_seq,
        hidden_count=int(row.hidden_count or 0),
        summaries=int(row.summaries or 0),
        files=int(row.files or 0),
        mcp_servers=int(row.mcp_servers or 0),
        recall=row.recall,
        profile=profile_from_columns(row._mapping, prefix="p_"),
        project_id=row.project_id,
        own_limits=(row.session_limit_usd, row.week_limit_usd),
        app_context=bool(row.has_app_context),
        pinned_facts=bool(row.has_pinned_facts),
    )


@dataclass(frozen=True, slots=True)
class PlanVersion:
    """A conversation's owner and state as the context endpoint checks them, and the key of
    everything its plan depends on (:func:`plan_version`)."""

    user_id: str
    archived_at: datetime | None
    mode: str
    profile_id: str | None
    #: Issue 17: the conversation's recall switch (in ``key`` too).
    recall: bool | None
    #: Changes whenever anything the plan depends on changes: the conversation (bumped by
    #: every append and exclusion), its mode and profile, the history's end, the summary
    #: version, the files and their states, the profile and its summariser as last changed,
    #: the profile's newest ledger row (calibration, CTX-2), the hidden versions' count.
    key: tuple[Any, ...]
    #: How many of its messages are hidden versions (PROJ-3).
    hidden_count: int = 0
    #: PROJ-1: the conversation's project (its instructions and files join the plan).
    project_id: str | None = None


def _scalar(query: Any) -> Any:
    return query.scalar_subquery()


_Summariser = aliased(ModelProfile)
# Everything in one prepared statement (built once: building it costs more than running it,
# at every keystroke).
_VERSION = select(
    Conversation.user_id,
    Conversation.archived_at,
    Conversation.updated_at,
    Conversation.mode,
    Conversation.profile_id,
    _scalar(select(func.max(Message.seq)).where(Message.conversation_id == Conversation.id)),
    _scalar(select(func.max(Summary.version)).where(Summary.conversation_id == Conversation.id)),
    _scalar(select(func.count(File.id)).where(File.conversation_id == Conversation.id)),
    _scalar(select(func.max(File.created_at)).where(File.conversation_id == Conversation.id)),
    _scalar(select(ModelProfile.updated_at).where(ModelProfile.id == Conversation.profile_id)),
    _scalar(
        select(_Summariser.updated_at).where(
            _Summariser.id
            == _scalar(
                select(ModelProfile.summarizer_profile_id)
                .where(ModelProfile.id == Conversation.profile_id)
                .correlate(Conversation)
            )
        )
    ),
    _scalar(select(func.max(UsageRow.num)).where(UsageRow.profile_id == Conversation.profile_id)),
    # PROJ-3: the hidden versions (a switch changes what the plan reads).
    _scalar(
        select(func.count())
        .select_from(Message)
        .where(Message.conversation_id == Conversation.id, HIDDEN)
    ).label("hidden_count"),
    Conversation.recall,
    # PROJ-1: the project and when it last changed (its instructions or files).
    Conversation.project_id,
    _scalar(select(Project.updated_at).where(Project.id == Conversation.project_id)),
).where(Conversation.id == bindparam("cid"))
_FILE_STATES = select(File.id, File.state, File.message_id).where(
    File.conversation_id == bindparam("cid")
)


def plan_version(session: Session | Connection, conversation_id: str) -> PlanVersion | None:
    """The conversation's plan version (None for an unknown id): one statement, and one
    more for the files' states when it has files."""
    connection = connection_of(session)
    row = connection.execute(_VERSION, {"cid": conversation_id}).first()
    if row is None:
        return None
    values = tuple(row)[5:]
    file_states = (
        tuple(connection.execute(_FILE_STATES, {"cid": conversation_id}).all()) if values[2] else ()
    )
    return PlanVersion(
        user_id=row.user_id,
        archived_at=row.archived_at,
        mode=row.mode,
        profile_id=row.profile_id,
        recall=row.recall,
        key=(row.updated_at, row.mode, row.profile_id, *values, file_states),
        project_id=row.project_id,
        hidden_count=int(row.hidden_count or 0),
    )


def latest_summary(session: Session | Connection, conversation_id: str) -> Any:
    """The newest summary's stored columns (a Core row, read like the ORM row), or None."""
    return connection_of(session).execute(_LATEST_SUMMARY, {"cid": conversation_id}).first()


def load_engine_conversation(
    session: Session | Connection,
    conversation_id: str,
    *,
    tokenizer: str = "estimate",
    instructions: str | None = None,
    tools: Sequence[dict[str, Any]] = (),
    bounds: tuple[int | None, int | None, int | None] | None = None,
    has_summary: bool = True,
    has_files: bool = True,
    calibration: float = 1.0,
    project_id: str | None = None,
    has_app_context: bool = True,
    with_facts: bool = False,
    has_pinned_facts: bool = True,
) -> EngineConversation:
    """The engine's view of a stored conversation, with counts for ``tokenizer``.

    What the caller already read in the same transaction saves a statement each:
    ``bounds``, the history's first and last ``seq`` and its count of hidden versions
    (:func:`message_bounds`);
    ``has_summary``/``has_files`` False when the conversation has none
    (:func:`conversation_extras`).  ``calibration``: the profile's factor (CTX-2), applied to
    every cached count (messages, the summary, files) as the calibrated tokenizer applies it
    to new text.  ``project_id``: the conversation's project (PROJ-1), whose instructions
    and files (with the conversation's own states) join the conversation's.
    ``has_app_context`` False: no app set a model context (APPS-3), so it is not read;
    ``has_pinned_facts`` False: the user pinned no facts (CTX-24), so they are not read.
    ``with_facts``: the summary carries the fact guard's record (CTX-24), which only a fold
    reads; a plan alone (the context endpoint, on every keystroke) does without it."""
    column = column_for(tokenizer)
    connection = connection_of(session)
    fill_uncounted(connection, conversation_id, column)  # once per message, then stored
    scale = Scale.of(calibration)
    messages = LazyMessages(connection, conversation_id, column, bounds=bounds, scale=scale)
    summary_row = latest_summary(connection, conversation_id) if has_summary else None
    summary = None
    if summary_row is not None and (
        # NULL: carried into a continued conversation, covering none of its messages (CTX-23).
        summary_row.through_message_id is None
        # A summary whose last covered message was evicted by the quota covers nothing left.
        or messages.position_of(summary_row.through_message_id) is not None
    ):
        # CTX-24: what the guard kept or dropped carries over into the next fold's rounds.
        record = read_record(summary_row.facts if with_facts else None)
        summary = EngineSummary(
            text=summary_row.text,
            through=summary_row.through_message_id,
            version=summary_row.version,
            focus=summary_row.focus,
            tokens=scale.apply(getattr(summary_row, column)),
            kept=record.kept,
            dropped=record.dropped,
            dropped_count=record.dropped_count,
            held=record.held,
        )
    files = [
        EngineFile(
            id=f.id,
            name=f.name,
            content=f.content,
            message_id=f.message_id,
            state=f.state,
            tokens=scale.apply(getattr(f, column)),
            mime=f.mime,
            width=f.width,
            height=f.height,
        )
        for f in (connection.execute(_FILES, {"cid": conversation_id}) if has_files else ())
    ]
    project_instructions = ""
    if project_id is not None:  # PROJ-1: the project's instructions and files ride along
        project_instructions, rows = projects.plan_inputs(connection, project_id, conversation_id)
        files[:0] = [
            EngineFile(
                id=f.id,
                name=f.name,
                content=f.content,
                state=f.state or "auto",
                tokens=scale.apply(getattr(f, column)),
            )
            for f in rows
        ]
    if instructions is None:
        instructions = (
            connection.scalar(
                select(Conversation.instructions).where(Conversation.id == conversation_id)
            )
            or ""
        )
    app_context = None
    if has_app_context:
        found = connection.execute(
            select(AppContextRow.text, getattr(AppContextRow, column)).where(
                AppContextRow.conversation_id == conversation_id
            )
        ).first()
        if found is not None:
            app_context = EngineAppContext(found[0], scale.apply(found[1]))
    pinned_facts = None
    if has_pinned_facts:
        block = connection.execute(
            select(PinnedFactBlockRow.text, getattr(PinnedFactBlockRow, column)).where(
                PinnedFactBlockRow.conversation_id == conversation_id
            )
        ).first()
        if block is not None:
            pinned_facts = EnginePinnedFacts(block[0], scale.apply(block[1]))
    return EngineConversation(
        messages=messages,
        summary=summary,
        files=files,
        instructions=instructions,
        tools=tools,
        project_instructions=project_instructions,
        app_context=app_context,
        pinned_facts=pinned_facts,
    )
