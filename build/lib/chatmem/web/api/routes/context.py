"""``GET /api/v1/conversations/{id}/context?draft=…`` — the plan for the next request — and
``GET /api/v1/profiles/{id}/context?draft=…&mode=…``, the same plan for a chat not created
yet (the counter follows the first message too, CTX-17).

A URL carries a few tens of kilobytes at most (uvicorn refuses longer request lines), so a
long draft — a pasted document — goes in a body instead: ``POST`` to the same paths with
``{"draft": …}`` (and ``"mode"`` for a profile) answers the same plan, counted exactly."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response
from pydantic import Field

from chatmem.context.values import Mode
from chatmem.store.units import read
from chatmem.turns.context_view import plan_bytes, plan_for, profile_plan_for
from chatmem.web.api.routes.turns import UserId
from chatmem.web.api.schemas import Body

router = APIRouter(prefix="/api/v1", tags=["context"])


#: The longest draft planned (characters), in a query or a body.
MAX_DRAFT = 1_000_000


class Draft(Body):
    """A draft too long for a URL."""

    draft: Annotated[str | None, Field(max_length=MAX_DRAFT)] = None


class ProfileDraft(Draft):
    mode: Mode = "full"


@router.get("/conversations/{conversation_id}/context")
async def get_context(
    conversation_id: str,
    request: Request,
    user_id: UserId,
    draft: Annotated[str | None, Query(max_length=MAX_DRAFT)] = None,
) -> Response:
    """What goes into the next request (CONTRACT plan JSON); the draft counts as the newest
    user message.  Served from a per-conversation cache: history is not re-read.

    Called on every keystroke: one read unit in one worker-thread hop (a plain route would
    hop for each dependency), with the remembered credentials of the turn routes."""
    return await _context(request, user_id, conversation_id, draft)


@router.post("/conversations/{conversation_id}/context")
async def post_context(
    conversation_id: str, body: Draft, request: Request, user_id: UserId
) -> Response:
    """:func:`get_context` for a draft sent as ``{"draft": …}``: one too long for a URL."""
    return await _context(request, user_id, conversation_id, body.draft)


async def _context(
    request: Request, user_id: str, conversation_id: str, draft: str | None
) -> Response:
    turns = request.app.state.turns
    body = await read(
        request.app.state.db,
        plan_for,
        turns.context_cache,
        user_id,
        conversation_id,
        draft,
        await turns.known.ready_schemas(),
        turns.calibrations,
        request.app.state.settings,
    )
    return Response(plan_bytes(body), media_type="application/json")


@router.get("/profiles/{profile_id}/context")
async def get_profile_context(
    profile_id: str,
    request: Request,
    user_id: UserId,
    draft: Annotated[str | None, Query(max_length=MAX_DRAFT)] = None,
    mode: Mode = "full",
) -> dict[str, object]:
    """The plan of a new conversation with this profile and memory mode: nothing stored yet,
    only the draft (and the instructions and tools every request carries).  404 for a
    profile the user may not use (STORE-1)."""
    return await _profile_context(request, user_id, profile_id, draft, mode)


@router.post("/profiles/{profile_id}/context")
async def post_profile_context(
    profile_id: str, body: ProfileDraft, request: Request, user_id: UserId
) -> dict[str, object]:
    """:func:`get_profile_context` for a draft sent as ``{"draft": …, "mode": …}``."""
    return await _profile_context(request, user_id, profile_id, body.draft, body.mode)


async def _profile_context(
    request: Request, user_id: str, profile_id: str, draft: str | None, mode: Mode
) -> dict[str, object]:
    turns = request.app.state.turns
    return await read(
        request.app.state.db,
        profile_plan_for,
        user_id,
        profile_id,
        draft,
        mode,
        await turns.known.ready_schemas(),
        turns.calibrations,
    )
