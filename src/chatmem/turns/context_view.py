"""The context endpoint's plan (``GET …/context?draft=``), without re-reading history.

The endpoint is called on every keystroke, so it must not read or count the history again
(CTX-2; bar ≤ 5 ms for 10,000 messages).  :class:`ContextCache` keeps, per conversation, the
engine's materialised view (messages with their cached counts, summary, files) under a key
that changes whenever anything the plan depends on changes: the conversation's
``updated_at`` (bumped by every append and exclusion), its last message ``seq``, the latest
summary version, the files' states, the profile, the mode and the offered tools.  Checking
the key is one small query; on a hit only the draft is counted and the engine plans.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, cast

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from chatmem import context as engine
from chatmem.context.values import Conversation as EngineConversation
from chatmem.context.values import Mode
from chatmem.errors import NotFound
from chatmem.store.tables.conversations import Conversation, File, Message, Summary
from chatmem.turns.inputs import calibrated_tokenizer, resolve_target


class ContextCache:
    """A small LRU of materialised engine conversations, safe across worker threads."""

    def __init__(self, size: int = 64) -> None:
        self._size = size
        self._items: OrderedDict[str, tuple[tuple[Any, ...], EngineConversation]] = OrderedDict()
        self._plans: OrderedDict[str, tuple[tuple[Any, ...], dict[str, Any]]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, conversation_id: str, key: tuple[Any, ...]) -> EngineConversation | None:
        with self._lock:
            item = self._items.get(conversation_id)
            if item is None or item[0] != key:
                return None
            self._items.move_to_end(conversation_id)
            return item[1]

    def get_plan(self, conversation_id: str, key: tuple[Any, ...]) -> dict[str, Any] | None:
        """The plan JSON for exactly these inputs (the engine is pure: same inputs, same plan)."""
        with self._lock:
            item = self._plans.get(conversation_id)
            return item[1] if item is not None and item[0] == key else None

    def put_plan(self, conversation_id: str, key: tuple[Any, ...], value: dict[str, Any]) -> None:
        with self._lock:
            self._plans[conversation_id] = (key, value)
            self._plans.move_to_end(conversation_id)
            while len(self._plans) > self._size:
                self._plans.popitem(last=False)

    def put(self, conversation_id: str, key: tuple[Any, ...], value: EngineConversation) -> None:
        with self._lock:
            self._items[conversation_id] = (key, value)
            self._items.move_to_end(conversation_id)
            while len(self._items) > self._size:
                self._items.popitem(last=False)


def _version_key(session: Session, row: Conversation) -> tuple[Any, ...]:
    last_seq = (
        select(func.max(Message.seq)).where(Message.conversation_id == row.id).scalar_subquery()
    )
    summary = (
        select(func.max(Summary.version)).where(Summary.conversation_id == row.id).scalar_subquery()
    )
    files = select(func.count(File.id), func.max(File.created_at)).where(
        File.conversation_id == row.id
    )
    seq, version = session.execute(select(last_seq, summary)).one()
    file_count, file_time = session.execute(files).one()
    file_states = (
        tuple(
            session.execute(
                select(File.id, File.state, File.message_id).where(File.conversation_id == row.id)
            ).all()
        )
        if file_count
        else ()
    )
    return (
        row.updated_at,
        row.mode,
        row.profile_id,
        seq,
        version,
        file_count,
        file_time,
        file_states,
    )


def plan_for(
    session: Session,
    cache: ContextCache,
    user_id: str,
    conversation_id: str,
    draft: str | None,
    tools: Sequence[Mapping[str, Any]] = (),
) -> dict[str, Any]:
    row = session.get(Conversation, conversation_id)
    if row is None or row.user_id != user_id or row.archived_at is not None:
        raise NotFound("conversation")
    target = resolve_target(session, user_id, row.profile_id)
    profile = target.engine_profile
    key = (
        *_version_key(session, row),
        profile,
        tuple(t.get("function", {}).get("name", "") for t in tools),
    )
    conversation = cache.get(conversation_id, key)
    if conversation is None:
        from chatmem.store.engine import load_engine_conversation

        lazy = load_engine_conversation(
            session, conversation_id, tokenizer=profile.tokenizer, tools=[dict(t) for t in tools]
        )
        conversation = replace(lazy, messages=tuple(lazy.messages), files=tuple(lazy.files))
        cache.put(conversation_id, key, conversation)
    memo_key = (key, draft or "")
    cached = cache.get_plan(conversation_id, memo_key)
    if cached is not None:
        return cached
    mode = engine.effective_mode(profile, cast(Mode, row.mode))
    plan = engine.plan(
        conversation,
        profile,
        mode=mode,
        draft=draft or None,
        tokenizer=calibrated_tokenizer(session, target),
    )
    result = plan_json(plan)
    cache.put_plan(conversation_id, memo_key, result)
    return result


def plan_json(plan: Any) -> dict[str, Any]:
    """``plan.to_dict()``, with the statuses expanded by the status map's own fast path
    (iterating a 10,000-entry range map item by item costs more than planning)."""
    status = plan.status
    fast = getattr(status, "to_dict", None)
    if fast is None:
        return dict(plan.to_dict())
    body: dict[str, Any] = replace(plan, status={}).to_dict()
    body["status"] = fast()
    return body
