"""``/api/v1/mcp-servers``: MCP servers, administrators only (TURN-4, PROF-4).

The URL is checked with the endpoint policy; headers (or a bearer token) are encrypted and
never returned — responses say ``has_headers``.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Response
from pydantic import Field

from chatmem.models import mcp_servers as repo
from chatmem.web.api.schemas import Body
from chatmem.web.deps import AdminUser, DbSession
from chatmem.web.model_deps import EndpointPolicyDep, SecretsDep

router = APIRouter(prefix="/api/v1/mcp-servers", tags=["mcp"])

Name = Annotated[str, Field(min_length=1, max_length=200)]
Url = Annotated[str, Field(min_length=1, max_length=2048)]


class McpServerCreate(Body):
    name: Name
    url: Url
    headers: dict[str, str] | None = None
    bearer_token: Annotated[str, Field(max_length=4096)] | None = None
    enabled: bool = True


class McpServerUpdate(Body):
    name: Name | None = None
    url: Url | None = None
    headers: dict[str, str] | None = None
    bearer_token: Annotated[str, Field(max_length=4096)] | None = None
    enabled: bool | None = None


@router.get("")
def list_servers(_: AdminUser, session: DbSession) -> dict[str, Any]:
    return {"items": [repo.public_view(s) for s in repo.list_servers(session)]}


@router.post("", status_code=201)
def create_server(
    body: McpServerCreate,
    _: AdminUser,
    session: DbSession,
    secrets: SecretsDep,
    policy: EndpointPolicyDep,
) -> dict[str, Any]:
    fields = body.model_dump(exclude_unset=True)
    return repo.public_view(repo.save_server(session, secrets, policy, fields))


@router.patch("/{server_id}")
def change_server(
    server_id: str,
    body: McpServerUpdate,
    _: AdminUser,
    session: DbSession,
    secrets: SecretsDep,
    policy: EndpointPolicyDep,
) -> dict[str, Any]:
    row = repo.get_server(session, server_id)
    fields = body.model_dump(exclude_unset=True)
    return repo.public_view(repo.save_server(session, secrets, policy, fields, row))


@router.delete("/{server_id}", status_code=204)
def delete_server(server_id: str, _: AdminUser, session: DbSession) -> Response:
    repo.delete_server(session, repo.get_server(session, server_id))
    return Response(status_code=204)
