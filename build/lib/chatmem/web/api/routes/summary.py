"""The current summary (CTX-23, CTX-9): ``GET/PUT …/summary`` and ``POST …/continue``.

A foreign or missing conversation answers ``not_found`` on every route (STORE-1), checked
before anything else.  An edit is refused while a turn or a compaction runs in the
conversation (``turn_running`` / ``compaction_running``): it takes the conversation's
coordinator lock for its one short write, as "Compress now" does, so it can neither race a
compaction writing the next version nor change the memory under a running turn.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from pydantic import Field

from chatmem.errors import NotFound
from chatmem.store import conversations as store
from chatmem.store import summaries
from chatmem.store.conversations import owned_conversation_row
from chatmem.store.quotas import Limits
from chatmem.store.sessions import Session
from chatmem.web.api.routes.turns import UserId, turn_service
from chatmem.web.api.schemas import Body
from chatmem.web.deps import CurrentUser, DbSession, SettingsDep
from chatmem.web.views.conversations import conversation_public
from chatmem.web.views.messages import summary_public

router = APIRouter(prefix="/api/v1/conversations", tags=["summary"])


class SummaryEdit(Body):
    text: str = Field(max_length=summaries.MAX_SUMMARY_CHARS)


def _public(summary: summaries.SummaryRecord) -> dict[str, Any]:
    # The estimate column: the summary's size, whatever tokenizer the profile uses.
    return summary_public(summary, "tokens_estimate")


@router.get("/{conversation_id}/summary")
def read_summary(conversation_id: str, user: CurrentUser, session: DbSession) -> dict[str, Any]:
    """The current summary version; ``not_found`` when there is none yet."""
    conversation = store.owned_conversation(session, user, conversation_id)
    summary = summaries.newest_summary(session, conversation.id)
    if summary is None:
        raise NotFound("summary")
    return _public(summary)


def _edit(session: Session, user_id: str, conversation_id: str, text: str) -> dict[str, Any]:
    conversation = owned_conversation_row(session, user_id, conversation_id)
    return _public(summaries.edit_summary(session, conversation, text))


@router.put("/{conversation_id}/summary")
async def edit_summary(
    conversation_id: str, body: SummaryEdit, request: Request, user_id: UserId
) -> dict[str, Any]:
    """A new summary version with the user's text; history is untouched.  Refusals:
    ``invalid_input`` (empty or too long), ``nothing_to_compress`` (no summary yet),
    ``turn_running`` / ``compaction_running``."""
    # Under the turn service's lock, with its refusal naming what holds it.
    return await turn_service(request).edit_summary(user_id, conversation_id, body.text, _edit)


@router.post("/{conversation_id}/continue", status_code=201)
def continue_conversation(
    conversation_id: str, user: CurrentUser, session: DbSession, settings: SettingsDep
) -> dict[str, Any]:
    """Continue in a new chat: a new conversation that starts from this one's summary;
    answers the new conversation (``nothing_to_compress`` when there is no summary yet)."""
    source = store.owned_conversation(session, user, conversation_id)
    continued = summaries.continue_in_new_conversation(
        session, user, source, Limits.from_settings(settings)
    )
    return conversation_public(continued, message_count=0, workspace=None)  # APPS-4: none yet
