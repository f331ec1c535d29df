"""Pinned facts (CTX-24): ``GET/POST …/facts``, ``PATCH/DELETE …/facts/{fid}``.

What the user asked the model to always remember in one conversation: each fact is sent,
with the others, in one message right after the summary in every request, counted as the
plan's "facts" row, and never folded into a summary.  A foreign or missing conversation or
fact answers ``not_found`` (STORE-1).  A blank fact, one over
:data:`~chatmem.store.pinned_facts.MAX_FACT_CHARS` characters, or one more than
:data:`~chatmem.store.pinned_facts.MAX_FACTS` is ``invalid_input``; facts that together would
take more than :data:`~chatmem.store.pinned_facts.MAX_FACTS_TOKENS` tokens are ``too_large``
(413).  A refused change stores nothing."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter
from fastapi.responses import Response
from pydantic import Field

from chatmem.store import pinned_facts
from chatmem.web.api.schemas import Body
from chatmem.web.deps import CurrentUser, DbSession
from chatmem.web.views.facts import fact_public

router = APIRouter(prefix="/api/v1/conversations", tags=["facts"])

# SEC-1: the body's bound; the store's own (trimmed, MAX_FACT_CHARS) answers a clearer error.
_TEXT = Annotated[str, Field(max_length=4 * pinned_facts.MAX_FACT_CHARS)]


class FactCreate(Body):
    text: _TEXT
    #: The message the fact was selected from (or the summary's kept fact's).
    message_id: Annotated[str, Field(min_length=1, max_length=64)] | None = None


class FactUpdate(Body):
    text: _TEXT


@router.get("/{conversation_id}/facts")
def list_facts(conversation_id: str, user: CurrentUser, session: DbSession) -> dict[str, Any]:
    """The conversation's pinned facts, oldest first (as they are sent)."""
    facts = pinned_facts.list_facts(session, user.id, conversation_id)
    return {"items": [fact_public(f) for f in facts], "limit": pinned_facts.MAX_FACTS}


@router.post("/{conversation_id}/facts", status_code=201)
def add_fact(
    conversation_id: str, body: FactCreate, user: CurrentUser, session: DbSession
) -> dict[str, Any]:
    """Pins a fact: every next request carries it."""
    fact = pinned_facts.add_fact(session, user.id, conversation_id, body.text, body.message_id)
    return fact_public(fact)


@router.patch("/{conversation_id}/facts/{fact_id}")
def edit_fact(
    conversation_id: str, fact_id: str, body: FactUpdate, user: CurrentUser, session: DbSession
) -> dict[str, Any]:
    """The fact with a new text (its place and origin stay)."""
    return fact_public(
        pinned_facts.edit_fact(session, user.id, conversation_id, fact_id, body.text)
    )


@router.delete("/{conversation_id}/facts/{fact_id}", status_code=204)
def delete_fact(
    conversation_id: str, fact_id: str, user: CurrentUser, session: DbSession
) -> Response:
    """Unpins the fact: the next request goes without it."""
    pinned_facts.delete_fact(session, user.id, conversation_id, fact_id)
    return Response(status_code=204)
