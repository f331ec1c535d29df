"""A turn submitted as a chat history (the OpenAI-compatible endpoint, ``web.openai_compat``).

The client names a model profile (or ``auto``), perhaps a conversation, and sends messages —
its whole history or only the new ones (:mod:`chatmem.turns.history_match` decides which are
new).  Admission is one unit of work under the conversation's lock, the same as a turn from
the UI (:meth:`TurnService.submit`): the conversation (a new one when none is named or the
history diverged), the model, the new messages, then the turn service's own checks and the
``running`` run.  A last message from the user is admitted exactly as the UI's message is
(the draft of the plan); tool results sent back by the client are stored first and the turn
answers them (``turn_start``: the user message that began the turn).  The run itself is a
normal run of the turn service: live in the UI, stoppable, in the ledger.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import update
from sqlalchemy.orm import Session

from chatmem.errors import CompactionRunning, InvalidInput, NotFound, TurnRunning
from chatmem.store import runs
from chatmem.store.conversations import create_conversation, owned_conversation_row
from chatmem.store.messages import insert_message
from chatmem.store.profiles import AUTO_PROFILE, visible_profile, visible_profiles
from chatmem.store.quotas import Limits
from chatmem.store.tables.accounts import User
from chatmem.store.tables.conversations import Conversation
from chatmem.store.types import new_id
from chatmem.store.units import quick_work
from chatmem.turns.history_match import CLIENT_TOOL, Said, match_history, stored_view
from chatmem.turns.inputs import TurnInputs
from chatmem.turns.service import LOCK_TTL, MAX_CONTENT_CHARS, TurnService, lock_name


@dataclass(frozen=True)
class HistoryTurn:
    run_id: str
    conversation_id: str
    #: The name of the profile that answers (what ``model`` reports back).
    model: str


def find_profile(session: Session, user_id: str, model: str) -> str:
    """The id of the profile ``model`` names — by id, else by name (the user's own before a
    shared one of the same name) — or ``auto`` (the turn service resolves it, USE-4)."""
    if model == AUTO_PROFILE:
        return AUTO_PROFILE
    profiles = visible_profiles(session, user_id)
    by_id = [p for p in profiles if p.id == model]
    named = sorted((p for p in profiles if p.name == model), key=lambda p: p.shared)
    found = by_id or named
    if not found:
        raise NotFound("model")
    return found[0].id


def answered_name(session: Session, user_id: str, inputs: TurnInputs) -> str:
    """The name of the profile that answers (what ``model`` reports back)."""
    name = (inputs.answered or {}).get("name")
    if not name and inputs.target.profile_id is not None:
        record = visible_profile(session, user_id, inputs.target.profile_id)
        name = record.name if record is not None else None
    return str(name or inputs.target.model or "")


def check_messages(messages: Sequence[Said]) -> None:
    if not messages:
        raise InvalidInput("messages: send at least one message")
    if messages[-1].role not in ("user", "tool"):
        raise InvalidInput("messages: the last message must be the user's or a tool result")
    for said in messages:
        if len(said.content) > MAX_CONTENT_CHARS:
            raise InvalidInput(f"content: at most {MAX_CONTENT_CHARS} characters")


async def submit_history(
    service: TurnService,
    user_id: str,
    messages: Sequence[Said],
    *,
    model: str,
    conversation_id: str | None,
    tools: Sequence[Mapping[str, Any]] = (),
) -> HistoryTurn:
    """Stores what is new and starts the turn; see the module docstring."""
    check_messages(messages)
    fresh = new_id()  # the new conversation's id, when there is one: locked before it exists
    locks: list[tuple[str, str]] = []
    try:
        fresh_token = await service.coordinator.acquire(lock_name(fresh), LOCK_TTL)
        if fresh_token is None:  # pragma: no cover - nobody knows the id yet
            raise RuntimeError("a fresh conversation id was locked")
        locks.append((lock_name(fresh), fresh_token))
        if conversation_id is not None:
            try:
                token = await service._take_lock(user_id, conversation_id, for_turn=True)
            except (TurnRunning, CompactionRunning):
                # Busy — but somebody else's conversation is not found, busy or not (STORE-1).
                await service._read(owned_conversation_row, user_id, conversation_id)
                raise
            locks.append((lock_name(conversation_id), token))
        run_id, message_id = new_id(), new_id()
        admitted = await quick_work(
            service.db,
            _admit,
            service,
            user_id,
            messages,
            model,
            conversation_id,
            fresh,
            run_id=run_id,
            message_id=message_id,
        )
    except BaseException:
        for lock in locks:
            await service.coordinator.release(*lock)
        raise
    inputs, servers, target, user_message_id, model_name = admitted
    for lock in locks:
        if lock[0] != lock_name(target):
            await service.coordinator.release(*lock)
    job = service._job(run_id, user_id, target, user_message_id, inputs)
    job.client_tools = tuple(dict(t) for t in tools)
    live = service._start(
        job, next(lock for lock in locks if lock[0] == lock_name(target)), servers
    )
    await asyncio.shield(live.opened)  # the live log exists before the answer starts
    return HistoryTurn(run_id, target, model_name)


def _admit(
    session: Session,
    service: TurnService,
    user_id: str,
    messages: Sequence[Said],
    model: str,
    conversation_id: str | None,
    fresh: str,
    *,
    run_id: str,
    message_id: str,
) -> tuple[TurnInputs, list[Any], str, str, str]:
    """One transaction: the conversation, the model, the new messages, the run.  Returns the
    first step's inputs, the MCP servers, the conversation's id, the id of the user message
    the turn answers, and the profile's name."""
    limits = Limits.from_settings(service.settings)
    profile_id = find_profile(session, user_id, model)
    new: Sequence[Said] = messages
    last_user: str | None = None
    source: Conversation | None = None
    target = fresh
    if conversation_id is not None:
        source = owned_conversation_row(session, user_id, conversation_id)
        view = stored_view(session, conversation_id)
        match = match_history(view.messages, messages)
        new = match.new
        if not match.diverged:
            target, last_user = conversation_id, view.last_user_id
    if target == fresh:
        user = session.get(User, user_id)
        if user is None:  # pragma: no cover - tokens cascade with their user
            raise NotFound("user")
        create_conversation(
            session,
            user,
            limits,
            title=source.title if source is not None else "",
            mode=source.mode if source is not None else "full",
            folder_id=source.folder_id if source is not None else None,
            instructions=source.instructions if source is not None else "",
            profile_id=profile_id,
            conversation_id=fresh,
        )
    elif source is not None and source.profile_id != profile_id:
        session.execute(
            update(Conversation).where(Conversation.id == target).values(profile_id=profile_id)
        )
    session.flush()
    ask = new[-1] if new and new[-1].role == "user" else None
    for said in new[:-1] if ask is not None else new:
        stored = insert_message(
            session,
            target,
            said.role,
            said.content,
            user_id=user_id,
            limits=limits,
            tool_calls=said.tool_calls or None,
            tool_call_id=said.tool_call_id,
            meta={CLIENT_TOOL: True} if said.role == "tool" else None,
        )
        if said.role == "user":
            last_user = stored
    if ask is not None:
        # The user's message: admitted exactly as a message typed in the UI.
        inputs, servers = service._admit_turn(
            session, user_id, target, ask.content, [], None, run_id=run_id, message_id=message_id
        )
        return inputs, servers, target, message_id, answered_name(session, user_id, inputs)
    if last_user is None:
        raise InvalidInput("messages: a conversation starts with a message from the user")
    inputs, servers = service._prepare(session, user_id, target, "", [], turn_start=last_user)
    runs.start_run(
        session,
        run_id=run_id,
        user_id=user_id,
        conversation_id=target,
        user_message_id=last_user,
        replica_id=service.coordinator.replica_id,
        answered_by=inputs.target.profile_id,
        answered_reason=(inputs.answered or {}).get("reason"),
    )
    return inputs, servers, target, last_user, answered_name(session, user_id, inputs)
