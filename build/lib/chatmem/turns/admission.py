"""Admission of a turn: one unit of work that either refuses the turn or starts it.

The rules, in the order the unit applies them:

- Nothing is written before every refusal is past: ownership (STORE-1), the MCP servers the
  turn will use, the model (USE-3 fallback, USE-4 "Auto"), whether it fits after the fold
  (TURN-5, CTX-19, CTX-21), the attached files (PROJ-2: only the chosen images).
- A turn answers either a new question — stored here with its files, and the first step's
  draft — or a user message already stored (``turn_start``: a regenerate, PROJ-3, or the
  tool results the OpenAI-compatible endpoint sends back); then there is no draft.
- A redo (PROJ-3) first puts the last answer (and, for an edit, its question) away as
  hidden versions.
- Last, the ``running`` run: inserted here and nowhere else (TURN-1, TURN-6's key with it).

The unit runs under the conversation's lock (:meth:`TurnService.conversation`), inside the
caller's transaction: a refusal anywhere leaves the database as it was.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from chatmem.errors import InvalidInput, NotFound
from chatmem.security.secret_box import SecretBox
from chatmem.settings import Settings
from chatmem.store import runs, versions
from chatmem.store.apps import app_call_in
from chatmem.store.conversations import owned_conversation_row
from chatmem.store.engine import StepConversation
from chatmem.store.files import attach_files, conversation_file_ids
from chatmem.store.messages import insert_message
from chatmem.store.quotas import Limits
from chatmem.store.sessions import Connection, Session
from chatmem.tools.toolbox import McpServerConfig, load_mcp_servers
from chatmem.turns import answerer as answers
from chatmem.turns.inputs import Calibrations, TurnInputs, load_inputs

MAX_CONTENT_CHARS = 1_000_000


@dataclass(frozen=True, slots=True)
class Redo:
    """PROJ-3: a turn that answers again — ``regenerate`` the answer to the last question
    (``message_id``: that question or a message of its answer), or else the last question
    (``message_id``) edited and sent again."""

    message_id: str
    regenerate: bool


@dataclass(frozen=True, slots=True)
class Admitted:
    """A turn let in: its first step's inputs (the plan, the question as the draft), the MCP
    servers it uses, and the id of the user message it answers."""

    inputs: TurnInputs
    servers: list[McpServerConfig]
    question_id: str


def check_content(content: str) -> None:
    if len(content) > MAX_CONTENT_CHARS:
        raise InvalidInput(f"content: at most {MAX_CONTENT_CHARS} characters")


def answered_public(
    connection: Session | Connection, conversation: StepConversation, settings: Settings
) -> tuple[str | None, Mapping[str, Any]]:
    """USE-3/USE-4: the profile that answers — the conversation's choice, unless it is locked
    (the fallback answers) or "Auto" (the best one allowed now) — read with the conversation;
    and who answers, as the feed shows it."""
    answerer = answers.chosen_answerer(
        connection,
        conversation.user_id,
        conversation.profile_id,
        conversation.own_limits,
        settings,
    )
    return (answerer.profile_id if answerer.reason else None), answerer.public()


def planned_public(
    connection: Session | Connection, conversation: StepConversation, settings: Settings
) -> tuple[str | None, Mapping[str, Any]]:
    """:func:`answered_public` for what runs besides a turn ("Compress now" and its price):
    the profile that would answer now, never a refusal (USE-3, CTX-11)."""
    answerer = answers.planned_answerer(
        connection, conversation.user_id, conversation.profile_id, settings
    )
    return (answerer.profile_id if answerer.reason else None), answerer.public()


class Admission:
    """The admission unit, with what it reads besides the database: the settings, the secret
    box (MCP headers, provider keys), the calibrations (CTX-2) and this replica's id (the
    run's owner, TURN-3)."""

    def __init__(
        self,
        settings: Settings,
        secrets: SecretBox,
        calibrations: Calibrations,
        replica_id: str,
    ) -> None:
        self.settings = settings
        self.secrets = secrets
        self.calibrations = calibrations
        self.replica_id = replica_id

    def _choose(
        self, connection: Session | Connection, conversation: StepConversation
    ) -> tuple[str | None, Mapping[str, Any]]:
        return answered_public(connection, conversation, self.settings)

    def admit(
        self,
        session: Session,
        user_id: str,
        conversation_id: str,
        *,
        run_id: str,
        content: str = "",
        file_ids: list[str] | None = None,
        message_id: str | None = None,
        turn_start: str | None = None,
        idempotency_key: str | None = None,
        from_app: str | None = None,
    ) -> Admitted:
        """Lets a turn in (see the module docstring): a new question ``content`` stored as
        ``message_id`` with ``file_ids``, or — ``turn_start`` — the turn answers the user
        message stored there; then the ``running`` run ``run_id``.  ``from_app``: the tool
        call whose app sent the question (APPS-3 ``ui/message``), stored with it."""
        files = file_ids or []
        inputs = load_inputs(
            session,
            conversation_id,
            turn_start=turn_start,
            draft=None if turn_start else content,
            draft_files=files,  # PROJ-2: only the chosen images go with the question
            user_id=user_id,
            secrets=self.secrets,
            live_only=True,
            calibrations=self.calibrations,
            choose=self._choose,
        )
        servers = (
            load_mcp_servers(session, self.settings, self.secrets) if inputs.mcp_servers else []
        )
        if inputs.target.profile_id is None:
            # Refused before anything is stored: a turn without a model can only fail.
            raise InvalidInput("This conversation has no model: choose a model profile first.")
        inputs.plan.require_fit()  # CTX-21: admission is exactly "fits after the fold"
        if files and conversation_file_ids(session, conversation_id, files) != set(files):
            raise NotFound("file")
        meta = None
        if from_app is not None:
            tool = app_call_in(session, conversation_id, from_app)
            meta = {"from_app": {"tool_call_id": from_app, "tool": tool}}
        if turn_start is not None:
            question_id = turn_start
        else:
            if message_id is None:
                raise ValueError("a new question needs its message id")
            stored = insert_message(
                session,
                conversation_id,
                "user",
                content,
                user_id=user_id,
                limits=Limits.from_settings(self.settings),
                message_id=message_id,
                meta=meta,
            )
            if stored is None:
                raise NotFound("conversation")  # the insert checks ownership itself
            if files:
                attach_files(session, files, message_id)
            question_id = message_id
        runs.start_run(
            session,
            run_id=run_id,
            user_id=user_id,
            conversation_id=conversation_id,
            user_message_id=question_id,
            replica_id=self.replica_id,
            idempotency_key=idempotency_key,
            answered_by=inputs.target.profile_id,
            answered_reason=(inputs.answered or {}).get("reason"),
        )
        return Admitted(inputs, servers, question_id)

    def admit_redo(
        self,
        session: Session,
        user_id: str,
        conversation_id: str,
        redo: Redo,
        *,
        run_id: str,
        content: str,
        file_ids: list[str],
        message_id: str,
        idempotency_key: str | None,
    ) -> Admitted:
        """:meth:`admit`, after the redo put the last answer (and question) away as versions
        (PROJ-3): an edit stores ``content`` as the new question; a regenerate answers the
        stored question again."""
        conversation = owned_conversation_row(session, user_id, conversation_id)
        if redo.regenerate:
            question_id = versions.begin_regenerate(session, conversation, redo.message_id)
            return self.admit(
                session,
                user_id,
                conversation_id,
                run_id=run_id,
                turn_start=question_id,
                idempotency_key=idempotency_key,
            )
        edit = versions.begin_edit(session, conversation, redo.message_id)
        admitted = self.admit(
            session,
            user_id,
            conversation_id,
            run_id=run_id,
            content=content,
            file_ids=file_ids,
            message_id=message_id,
            idempotency_key=idempotency_key,
        )
        versions.finish_edit(session, conversation_id, edit, message_id)
        return admitted


def admitted_before(
    session: Session, user_id: str, conversation_id: str, idempotency_key: str | None
) -> str | None:
    """Ownership (STORE-1), then the run a retried submit already started (TURN-6)."""
    owned_conversation_row(session, user_id, conversation_id)
    if not idempotency_key:
        return None
    existing = runs.run_for_idempotency_key(session, user_id, idempotency_key)
    if existing is None:
        return None
    if existing.conversation_id != conversation_id:
        raise InvalidInput("Idempotency-Key was already used for another conversation.")
    return existing.id
