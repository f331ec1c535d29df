"""``PUT/DELETE /api/v1/conversations/{id}/app-context`` (APPS-3): what an MCP App sends with
``ui/update-model-context`` — MCP content blocks and ``structuredContent`` — given to the
model with each next request of the conversation, in place of what the app sent before.

The call named must be one of this conversation's and have an app (else ``not_found``, as
for another user's conversation); more than 4,000 tokens is ``too_large`` (413) and nothing
is stored.  Its count is the plan's "Apps" row (CTX-18)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter
from fastapi.responses import Response
from pydantic import ConfigDict, Field

from chatmem.store import app_context
from chatmem.web.api.schemas import Body
from chatmem.web.deps import CurrentUser, DbSession

router = APIRouter(prefix="/api/v1/conversations", tags=["apps"])

#: The most content blocks one update may carry (the token bound decides the rest).
MAX_BLOCKS = 200


class AppContextBody(Body):
    model_config = ConfigDict(extra="forbid", strict=True, populate_by_name=True)

    tool_call_id: Annotated[str, Field(min_length=1, max_length=64)]
    content: Annotated[list[dict[str, Any]], Field(max_length=MAX_BLOCKS)]
    structured_content: Annotated[dict[str, Any] | None, Field(alias="structuredContent")] = None


@router.put("/{conversation_id}/app-context")
def put_app_context(
    conversation_id: str, body: AppContextBody, user: CurrentUser, session: DbSession
) -> dict[str, Any]:
    """Sets the conversation's app context; answers ``{"tokens": n}``, its size in tokens."""
    tokens = app_context.set_app_context(
        session,
        user.id,
        conversation_id,
        body.tool_call_id,
        body.content,
        body.structured_content,
    )
    return {"tokens": tokens}


@router.delete("/{conversation_id}/app-context", status_code=204)
def delete_app_context(conversation_id: str, user: CurrentUser, session: DbSession) -> Response:
    """Clears the conversation's app context: the next request is sent without it."""
    app_context.clear_app_context(session, user.id, conversation_id)
    return Response(status_code=204)
