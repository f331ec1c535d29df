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

import orjson

from chatmem import context as engine
from chatmem.context.recall import recall_enabled, with_recall
from chatmem.context.values import Conversation as EngineConversation
from chatmem.context.values import Mode
from chatmem.errors import NotFound
from chatmem.settings import Settings
from chatmem.store.db import connection_of
from chatmem.store.engine import load_engine_conversation, plan_version
from chatmem.store.profiles import visible_profile
from chatmem.store.sessions import Session
from chatmem.store.versions import hidden_ids
from chatmem.turns.answerer import Answerer, planned_answerer
from chatmem.turns.inputs import (
    Calibrations,
    calibrated_tokenizer,
    factor_of,
    resolve_target,
)


class ContextCache:
    """A small LRU of materialised engine conversations, safe across worker threads."""

    def __init__(self, size: int = 64) -> None:
        self._size = size
        self._items: OrderedDict[str, tuple[tuple[Any, ...], EngineConversation]] = OrderedDict()
        self._plans: OrderedDict[str, tuple[tuple[Any, ...], dict[str, Any]]] = OrderedDict()
        self._targets: dict[str, tuple[tuple[Any, ...], Any]] = {}
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

    def get_target(self, conversation_id: str, key: tuple[Any, ...]) -> Any:
        with self._lock:
            item = self._targets.get(conversation_id)
            return item[1] if item is not None and item[0] == key else None

    def put_target(self, conversation_id: str, key: tuple[Any, ...], value: Any) -> None:
        with self._lock:
            self._targets[conversation_id] = (key, value)
            while len(self._targets) > self._size:
                self._targets.pop(next(iter(self._targets)))

    def put(self, conversation_id: str, key: tuple[Any, ...], value: EngineConversation) -> None:
        with self._lock:
            self._items[conversation_id] = (key, value)
            self._items.move_to_end(conversation_id)
            while len(self._items) > self._size:
                self._items.popitem(last=False)


def plan_for(
    session: Session,
    cache: ContextCache,
    user_id: str,
    conversation_id: str,
    draft: str | None,
    tools: Sequence[Mapping[str, Any]] = (),
    calibrations: Calibrations | None = None,
    settings: Settings | None = None,
) -> dict[str, Any]:
    """The plan of the next request, on the profile that will answer it: the fallback while
    the chat's own model is locked, Auto's pick (USE-3, USE-4; with ``settings``), which the
    plan names in ``answered_by`` (absent when the chat's own model answers)."""
    connection = connection_of(session)
    row = plan_version(connection, conversation_id)
    if row is None or row.user_id != user_id or row.archived_at is not None:
        raise NotFound("conversation")
    answerer = (
        planned_answerer(connection, user_id, row.profile_id, settings)
        if settings is not None
        else Answerer(row.profile_id)
    )
    answered = {"answered_by": answerer.public()} if answerer.reason else {}
    names = tuple(t.get("function", {}).get("name", "") for t in tools)
    key = (*row.key, answerer.profile_id, names)
    # The profile view and the calibrated tokenizer change only with the key's profile and
    # ledger parts: resolved once per key, not per keystroke.
    resolved = cache.get_target(conversation_id, key)
    if resolved is None:
        target = resolve_target(connection, user_id, answerer.profile_id)
        resolved = (target, calibrated_tokenizer(connection, target, calibrations))
        cache.put_target(conversation_id, key, resolved)
    target, tokenizer = resolved
    profile = target.engine_profile
    mode = engine.effective_mode(profile, cast(Mode, row.mode))
    # Issue 17: the key holds what decides recall (the switches, the mode, the profile).
    tools = with_recall(tools, recall_enabled(mode, row.recall, target.recall))
    conversation = cache.get(conversation_id, key)
    if conversation is None:
        lazy = load_engine_conversation(
            connection,
            conversation_id,
            tokenizer=profile.tokenizer,
            tools=[dict(t) for t in tools],
            calibration=factor_of(tokenizer),
            project_id=row.project_id,
        )
        conversation = replace(lazy, messages=tuple(lazy.messages), files=tuple(lazy.files))
        cache.put(conversation_id, key, conversation)
    # The plan is a pure function of its inputs.  Outside window mode the draft enters it
    # only as the newest user message: through its token count, and verbatim as the last
    # message sent.  Plans are therefore memoised per draft *token count* (a keystroke
    # rarely changes it) and the draft text is put in place on a hit; a plan whose last
    # message is not exactly the draft is only reused for exactly the same draft.
    base = (key, mode, repr(tokenizer))
    draft_text = draft or ""
    by_count = None
    if draft_text and mode != "window":
        by_count = (
            *base,
            "tokens",
            engine.count_message(
                engine.Message(id="draft", role="user", content=draft_text), tokenizer
            ),
        )
    exact = (*base, "exact", draft_text)
    for memo_key in (exact, by_count):
        if memo_key is None:
            continue
        cached = cache.get_plan(conversation_id, memo_key)
        if cached is not None:
            if memo_key is by_count:
                messages = list(cached["messages"])
                messages[-1] = {"role": "user", "content": draft_text}
                return {**cached, "messages": messages, **answered}
            return {**cached, **answered}
    plan = engine.plan(
        conversation,
        profile,
        mode=mode,
        draft=draft or None,
        tokenizer=tokenizer,
    )
    result = plan_json(plan)
    if row.hidden_count:
        # PROJ-3: hidden versions are never planned; their status says so.
        result["status"].update(dict.fromkeys(hidden_ids(session, conversation_id), "hidden"))
    sent = result["messages"]
    substitutable = (
        by_count is not None and bool(sent) and sent[-1] == {"role": "user", "content": draft_text}
    )
    cache.put_plan(
        conversation_id, by_count if by_count is not None and substitutable else exact, result
    )
    return {**result, **answered}


def profile_plan_for(
    session: Session,
    user_id: str,
    profile_id: str,
    draft: str | None,
    mode: Mode,
    tools: Sequence[Mapping[str, Any]] = (),
    calibrations: Calibrations | None = None,
) -> dict[str, Any]:
    """The plan of a conversation not created yet (``GET /profiles/{id}/context``): an empty
    history with this profile, so the counter follows the first message as it is typed
    (CTX-17).  A profile the user may not use answers like a missing one (STORE-1)."""
    connection = connection_of(session)
    row = visible_profile(connection, user_id, profile_id)
    if row is None:
        raise NotFound("profile")
    target = resolve_target(connection, user_id, profile_id, read=row)
    profile = target.engine_profile
    mode = engine.effective_mode(profile, mode)
    tools = with_recall(tools, recall_enabled(mode, None, row.recall))
    conversation = EngineConversation(messages=(), tools=tuple(dict(t) for t in tools))
    plan = engine.plan(
        conversation,
        profile,
        mode=mode,
        draft=draft or None,
        tokenizer=calibrated_tokenizer(connection, target, calibrations),
    )
    return plan_json(plan)


def plan_bytes(body: dict[str, Any]) -> bytes:
    """The plan JSON, encoded by orjson: a keystroke's plan holds every message sent and the
    status of each stored one (10,000 of them), and the standard encoder takes ten times as
    long over them (``bench/turns.py context``: handler 2.3 against 0.2 ms).  Never NaN or
    Infinity (orjson writes them as null), which JSON.parse would refuse (SEC-1)."""
    return orjson.dumps(body)


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
