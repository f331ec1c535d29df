"""Storage quotas (STORE-4) and the eviction policy.

Off by default.  The ``extension`` preset reproduces the browser-extension limits (50 folders,
200 conversations, 300 messages per conversation); ``max_*`` settings override single limits.

Eviction, when a user has more conversations than allowed: pinned conversations are set aside
first; the most recently active unpinned ones are kept and the oldest unpinned go; only if the
pinned ones alone exceed the limit are the excess pinned evicted too (oldest first), and last.
A conversation over the message limit loses its oldest messages (a leading tool result goes
with the call it answered, CTX-20).  Every eviction is counted on the user — never silent.
Archived conversations live in archive files and do not count.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import delete, func, select, update
from sqlalchemy.orm import Session

from chatmem.errors import QuotaExceeded
from chatmem.settings import Settings
from chatmem.store.accounts import Account
from chatmem.store.tables.accounts import User
from chatmem.store.tables.conversations import Conversation, File, Folder, Message

PRESETS: dict[str, tuple[int | None, int | None, int | None]] = {
    "off": (None, None, None),
    "extension": (50, 200, 300),
}
#: PROJ-1: projects per user in each preset (the extension's folder limit).
PROJECT_PRESETS: dict[str, int | None] = {"off": None, "extension": 50}


@dataclass(frozen=True)
class Limits:
    """``None`` means unlimited."""

    folders: int | None = None
    conversations: int | None = None
    messages: int | None = None
    projects: int | None = None

    @classmethod
    def from_settings(cls, settings: Settings) -> Limits:
        folders, conversations, messages = PRESETS[settings.quota]
        return cls(
            folders=settings.max_folders if settings.max_folders is not None else folders,
            conversations=(
                settings.max_conversations
                if settings.max_conversations is not None
                else conversations
            ),
            messages=settings.max_messages if settings.max_messages is not None else messages,
            projects=(
                settings.max_projects
                if settings.max_projects is not None
                else PROJECT_PRESETS[settings.quota]
            ),
        )


UNLIMITED = Limits()


def check_folder_quota(session: Session, user: Account, limits: Limits) -> None:
    """Refuses a new folder when the user already has ``limits.folders`` of them."""
    if limits.folders is None:
        return
    count = session.scalar(
        select(func.count()).select_from(Folder).where(Folder.user_id == user.id)
    )
    if (count or 0) >= limits.folders:
        raise QuotaExceeded("folders", limits.folders)


def conversations_to_evict(rows: list[tuple[str, bool]], limit: int) -> list[str]:
    """The policy as a pure function.  ``rows`` are ``(id, pinned)`` from most to least
    recently active; returns the ids to evict, in eviction order."""
    if len(rows) <= limit:
        return []
    pinned = [cid for cid, is_pinned in rows if is_pinned]
    unpinned = [cid for cid, is_pinned in rows if not is_pinned]
    room_for_unpinned = max(limit - len(pinned), 0)
    evicted = list(reversed(unpinned[room_for_unpinned:]))  # oldest unpinned first
    if len(pinned) > limit:
        evicted += list(reversed(pinned[limit:]))  # then excess pinned, oldest first
    return evicted


def enforce_conversation_quota(session: Session, user: Account, limits: Limits) -> int:
    """Evicts conversations above the limit and counts them on the user; returns how many
    went."""
    if limits.conversations is None:
        return 0
    rows = session.execute(
        select(Conversation.id, Conversation.pinned)
        .where(Conversation.user_id == user.id, Conversation.archived_at.is_(None))
        .order_by(Conversation.last_active_at.desc(), Conversation.id.desc())
    ).all()
    doomed = conversations_to_evict([(r[0], bool(r[1])) for r in rows], limits.conversations)
    if doomed:
        session.execute(delete(Conversation).where(Conversation.id.in_(doomed)))
        _count_evicted(session, user.id, conversations=len(doomed))
    return len(doomed)


def enforce_message_quota(
    session: Session, user: Account, conversation_id: str, limits: Limits
) -> int:
    """Deletes the oldest messages above the per-conversation limit and counts them on the
    user; returns how many went."""
    if limits.messages is None:
        return 0
    count = (
        session.scalar(
            select(func.count())
            .select_from(Message)
            .where(Message.conversation_id == conversation_id)
        )
        or 0
    )
    excess = count - limits.messages
    if excess <= 0:
        return 0
    oldest = session.execute(
        select(Message.seq, Message.role)
        .where(Message.conversation_id == conversation_id)
        .order_by(Message.seq)
        .limit(excess + limits.messages)
    ).all()
    cut = excess
    # Never leave a tool result whose call was evicted at the head of the history (CTX-20).
    while cut < len(oldest) - 1 and oldest[cut][1] == "tool":
        cut += 1
    last_seq = oldest[cut - 1][0]
    evicted = select(Message.id).where(
        Message.conversation_id == conversation_id, Message.seq <= last_seq
    )
    # PROJ-2: an evicted question's images go with it (loose, they would ride with the draft).
    session.execute(
        delete(File).where(
            File.conversation_id == conversation_id,
            File.width.is_not(None),
            File.message_id.in_(evicted),
        )
    )
    session.execute(
        delete(Message).where(Message.conversation_id == conversation_id, Message.seq <= last_seq)
    )
    _count_evicted(session, user.id, messages=cut)
    return cut


def _count_evicted(
    session: Session, user_id: str, *, conversations: int = 0, messages: int = 0
) -> None:
    """STORE-4: what went is added to the user's counts, in the database (an ORM row of the
    user held in this session is brought up to date with it)."""
    session.execute(
        update(User)
        .where(User.id == user_id)
        .values(
            evicted_conversations=User.evicted_conversations + conversations,
            evicted_messages=User.evicted_messages + messages,
        )
    )
    session.flush()
