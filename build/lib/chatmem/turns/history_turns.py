"""A turn submitted as a chat history (the OpenAI-compatible endpoint, ``web.openai_compat``).

The client names a model profile (or ``auto``), perhaps a conversation, and sends messages —
its whole history or only the new ones (:mod:`chatmem.turns.history_match` decides which are
new).  :meth:`TurnService.submit_history` takes the conversation's lock and runs
:func:`admit_history`, one unit of work as for a turn from the UI: the conversation (a new
one when none is named or the history diverged), the model, the new messages, then the
turn's own admission (:mod:`chatmem.turns.admission`) with the ``running`` run.  A last message from the user is admitted exactly as the UI's message is
(the draft of the plan); tool results sent back by the client are stored first and the turn
answers them (``turn_start``: the user message that began the turn).  The run itself is a
normal run of the turn service: live in the UI, stoppable, in the ledger.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from chatmem.errors import InvalidInput, NotFound
from chatmem.store.conversations import (
    ConversationRecord,
    create_conversation_as,
    owned_conversation_row,
    set_conversation_profile,
)
from chatmem.store.messages import insert_message
from chatmem.store.profiles import AUTO_PROFILE, visible_profile, visible_profiles
from chatmem.store.quotas import Limits
from chatmem.store.sessions import Session
from chatmem.turns.admission import MAX_CONTENT_CHARS, Admission, Admitted
from chatmem.turns.history_match import CLIENT_TOOL, Said, match_history, stored_view
from chatmem.turns.inputs import TurnInputs


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


def admit_history(
    session: Session,
    admission: Admission,
    user_id: str,
    messages: Sequence[Said],
    model: str,
    conversation_id: str | None,
    fresh: str,
    *,
    run_id: str,
    message_id: str,
) -> tuple[Admitted, str, str]:
    """One transaction: the conversation, the model, the new messages, then the turn's
    admission (:meth:`Admission.admit`).  Returns the admitted turn, the conversation's id
    and the profile's name."""
    limits = Limits.from_settings(admission.settings)
    profile_id = find_profile(session, user_id, model)
    new: Sequence[Said] = messages
    last_user: str | None = None
    source: ConversationRecord | None = None
    target = fresh
    if conversation_id is not None:
        source = owned_conversation_row(session, user_id, conversation_id)
        view = stored_view(session, conversation_id)
        match = match_history(view.messages, messages)
        new = match.new
        if not match.diverged:
            target, last_user = conversation_id, view.last_user_id
    if target == fresh:
        create_conversation_as(
            session,
            user_id,
            limits,
            title=source.title if source is not None else "",
            mode=source.mode if source is not None else "full",
            folder_id=source.folder_id if source is not None else None,
            instructions=source.instructions if source is not None else "",
            profile_id=profile_id,
            conversation_id=fresh,
        )
    elif source is not None and source.profile_id != profile_id:
        set_conversation_profile(session, target, profile_id)
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
        admitted = admission.admit(
            session,
            user_id,
            target,
            run_id=run_id,
            content=ask.content,
            message_id=message_id,
        )
    elif last_user is None:
        raise InvalidInput("messages: a conversation starts with a message from the user")
    else:
        admitted = admission.admit(session, user_id, target, run_id=run_id, turn_start=last_user)
    return admitted, target, answered_name(session, user_id, admitted.inputs)
