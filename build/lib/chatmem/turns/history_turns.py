"""A turn submitted as a chat history (the OpenAI-compatible endpoint, ``web.openai_compat``).

The client names a model profile (or ``auto``), perhaps a conversation, and sends messages —
its whole history or only the new ones (:mod:`chatmem.turns.history_match` decides which are
new).  Which conversation (API-1):

1. one it names (:func:`named_conversation`): this user's conversation of that id, else the
   client's own key — the conversation it named before, or a new one created under the key;
2. else the history index (:mod:`chatmem.store.history_keys`): the user's most recently
   active conversation whose stored view the history repeats, verified here
   (:func:`continues`; a stale candidate raises :class:`NotContinued` and the next is tried);
3. else a new one.

:meth:`TurnService.submit_history` takes the conversation's lock and runs
:func:`admit_history`, one unit of work as for a turn from the UI: the conversation (a new
one when none is found or a named one's history diverged), the model, the new messages, then
the turn's own admission (:mod:`chatmem.turns.admission`) with the ``running`` run, and the
conversation's keys in the history index.  A last message from the user is admitted exactly
as the UI's message is (the draft of the plan); tool results sent back by the client are
stored first and the turn answers them (``turn_start``: the user message that began the
turn).  The run itself is a normal run of the turn service: live in the UI, stoppable, in
the ledger.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass

from chatmem.errors import InvalidInput, NotFound, TurnRunning
from chatmem.store.conversations import (
    ConversationRecord,
    conversation_by_id,
    create_conversation_as,
    owned_conversation_row,
    set_conversation_profile,
)
from chatmem.store.history_keys import (
    client_conversation,
    set_client_key,
    set_view_keys,
    view_keys,
)
from chatmem.store.messages import insert_message
from chatmem.store.profiles import AUTO_PROFILE, visible_profile, visible_profiles
from chatmem.store.quotas import Limits
from chatmem.store.sessions import Session
from chatmem.turns.admission import MAX_CONTENT_CHARS, Admission, Admitted
from chatmem.turns.events import RunEvent
from chatmem.turns.history_images import check_accepted, store_images
from chatmem.turns.history_match import (
    CLIENT_TOOL,
    Said,
    StoredView,
    match_history,
    stored_view,
)
from chatmem.turns.inputs import TurnInputs


@dataclass(frozen=True)
class HistoryTurn:
    run_id: str
    conversation_id: str
    #: The name of the profile that answers (what ``model`` reports back).
    model: str
    #: The client's own key for the conversation, when it named it so (what the answer's
    #: ``X-Chatmem-Conversation`` says back instead of the id).
    client_key: str | None = None
    #: ``store: false`` (:mod:`chatmem.turns.stateless`): the answer's events — there is no
    #: run to watch, and ``run_id`` and ``conversation_id`` name nothing stored ("").
    events: AsyncIterator[RunEvent] | None = None


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


class NotContinued(Exception):
    """The conversation the history index found does not hold the request's history (its
    keys were stale): the unit is rolled back and the next candidate tried."""


def named_conversation(session: Session, user_id: str, name: str) -> tuple[str | None, str | None]:
    """What a request's conversation name is: this user's conversation of that id (then no
    client key), else the client's own key and the conversation it names (None: a new one
    will).  Another user's conversation id is not found (STORE-1), as it always was: a key
    is a name chatmem did not issue."""
    record = conversation_by_id(session, name)
    if record is not None:
        if record.user_id != user_id:
            raise NotFound("conversation")
        return name, None
    return client_conversation(session, user_id, name), name


def continues(stored: Sequence[Said], incoming: Sequence[Said]) -> bool:
    """Whether ``incoming`` repeats the whole stored view first (rule 2 of
    :mod:`chatmem.turns.history_match`): what a hit of the history index must show."""
    return len(incoming) >= len(stored) and all(
        a.same_as(b) for a, b in zip(stored, incoming, strict=False)
    )


@dataclass(frozen=True)
class Named:
    """How a request names its conversation: ``conversation_id`` (this user's, by id or by
    the client's key; None with a key: a new one), ``client_name`` (the client's own key) or
    ``found`` (the history index's candidate, verified here)."""

    conversation_id: str | None = None
    client_name: str | None = None
    found: str | None = None


def _target(
    session: Session, user_id: str, messages: Sequence[Said], named: Named, fresh: str
) -> tuple[str, Sequence[Said], StoredView | None, ConversationRecord | None]:
    """The conversation the turn goes to, the messages new to it, its stored view (None:
    the new conversation ``fresh``) and the conversation a diverged history came from."""
    if named.conversation_id is not None:
        source = owned_conversation_row(session, user_id, named.conversation_id)
        view = stored_view(session, named.conversation_id)
        match = match_history(view.messages, messages)
        if match.diverged:
            return fresh, messages, None, source
        return named.conversation_id, match.new, view, source
    if named.found is not None:
        source = owned_conversation_row(session, user_id, named.found)
        view = stored_view(session, named.found)
        if not continues(view.messages, messages):
            raise NotContinued()
        return named.found, messages[len(view.messages) :], view, source
    if named.client_name is not None and client_conversation(session, user_id, named.client_name):
        # A concurrent first request with the same new key created it meanwhile: its turn
        # is being admitted there (the client sent two at once).
        raise TurnRunning()
    return fresh, messages, None, None


def admit_history(
    session: Session,
    admission: Admission,
    user_id: str,
    messages: Sequence[Said],
    model: str,
    named: Named,
    fresh: str,
    *,
    run_id: str,
    message_id: str,
) -> tuple[Admitted, str, str]:
    """One transaction: the conversation, the model, the new messages, then the turn's
    admission (:meth:`Admission.admit`), and last the conversation's keys in the history
    index (the view the request leaves: its own history).  Returns the admitted turn, the
    conversation's id and the profile's name."""
    limits = Limits.from_settings(admission.settings)
    profile_id = find_profile(session, user_id, model)
    target, new, view, source = _target(session, user_id, messages, named, fresh)
    last_user = view.last_user_id if view is not None else None
    if view is None:
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
            store_images(session, admission.settings, user_id, target, said, stored)
    if ask is not None:
        # The user's message: admitted exactly as a message typed in the UI, its images as
        # the UI's uploads (issue 29).
        admitted = admission.admit(
            session,
            user_id,
            target,
            run_id=run_id,
            content=ask.content,
            message_id=message_id,
            file_ids=store_images(session, admission.settings, user_id, target, ask, None),
        )
    elif last_user is None:
        raise InvalidInput("messages: a conversation starts with a message from the user")
    else:
        admitted = admission.admit(session, user_id, target, run_id=run_id, turn_start=last_user)
    name = answered_name(session, user_id, admitted.inputs)
    check_accepted(messages, admitted.inputs, name)  # refused: nothing of it is kept
    left = (*(view.messages if view is not None else ()), *new)
    set_view_keys(session, user_id, target, view_keys(left))
    if named.client_name is not None:
        set_client_key(session, user_id, target, named.client_name)
    return admitted, target, name
