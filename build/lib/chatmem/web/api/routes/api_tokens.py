"""``/api/v1/tokens``: a user's own API tokens — list, create (the secret shown once), revoke.

A token acts as its user on the API and on ``/v1`` (``Authorization: Bearer …``); it is
stored only as a digest, so a lost one cannot be shown again, only revoked and replaced.  A
revoked token stops at once on the replica that revoked it, and within the credential cache's
few seconds on the others (as a sign-out does).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Request, Response
from pydantic import Field

from chatmem.store import accounts
from chatmem.store.types import iso
from chatmem.web.api.schemas import Body
from chatmem.web.deps import CurrentUser, DbSession

router = APIRouter(prefix="/api/v1/tokens", tags=["tokens"])


class NewTokenBody(Body):
    #: What the token is for ("laptop", "CI"): shown in the list.
    label: Annotated[str, Field(max_length=200)] = ""


def _public(record: accounts.TokenRecord) -> dict[str, Any]:
    return {
        "id": record.id,
        "label": record.label,
        "created_at": iso(record.created_at),
        # Right to a minute or so (:mod:`chatmem.web.token_use`); null: never used.
        "last_used_at": iso(record.last_used_at) if record.last_used_at else None,
    }


@router.get("")
def list_tokens(user: CurrentUser, session: DbSession) -> dict[str, Any]:
    return {"items": [_public(r) for r in accounts.api_tokens(session, user.id)]}


@router.post("", status_code=201)
def create_token(body: NewTokenBody, user: CurrentUser, session: DbSession) -> dict[str, Any]:
    """A new token; ``token`` is the secret, in this answer only."""
    created = accounts.new_api_token(session, user, body.label.strip())
    return {**_public(created.record), "token": created.token}


@router.delete("/{token_id}", status_code=204)
def revoke_token(
    token_id: str, request: Request, user: CurrentUser, session: DbSession
) -> Response:
    """Revokes one of the user's tokens (404 for anyone else's)."""
    token_hash = accounts.revoke_api_token(session, user.id, token_id)
    request.app.state.credentials.forget_digest(token_hash)
    return Response(status_code=204)
