"""The JSON API under ``/api/v1``: one router per resource in ``routes/``."""

from __future__ import annotations

import importlib

from fastapi import APIRouter, FastAPI

from chatmem.web.errors import ERROR_RESPONSES

# Each module in routes/ exposes ``router``.  Listed here so the order in /openapi.json is stable.
# FastAPI tries routes in order, so the ones on the path to the first token, and the context
# endpoint called on every keystroke, come first (no two modules have overlapping paths).
ROUTE_MODULES = [
    "turns",
    "runs",
    "context",
    "health",
    "exchange",
    "archive",
    "auth",
    "api_tokens",
    "folders",
    "conversations",
    "messages",
    "files",
    "projects",
    "profiles",
    "mcp_servers",
    "tool_calls",
    "apps",
    "app_context",
    "facts",
    "compaction",
    "summary",
    "usage",
    "admin",
]


def api_routers() -> list[APIRouter]:
    return [
        importlib.import_module(f"chatmem.web.api.routes.{name}").router for name in ROUTE_MODULES
    ]


def install_api(app: FastAPI) -> None:
    """Includes every resource router in the app itself, one level deep: FastAPI matches a
    request by walking included routers, and each extra level of nesting costs every request
    (the turn routes are on the path to the first token).  Every operation declares the
    CONTRACT's error responses in /openapi.json."""
    for router in api_routers():
        app.include_router(router, responses=ERROR_RESPONSES)
