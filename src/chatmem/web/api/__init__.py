"""The JSON API under ``/api/v1``: one router per resource in ``routes/``."""

from __future__ import annotations

import importlib

from fastapi import APIRouter

# Each module in routes/ exposes ``router``.  Listed here so the order in /openapi.json is stable.
ROUTE_MODULES = [
    "health",
    "exchange",
    "archive",
    "auth",
    "folders",
    "conversations",
    "messages",
    "files",
    "profiles",
    "mcp_servers",
    "turns",
    "runs",
    "context",
    "compaction",
    "usage",
]


def build_api_router() -> APIRouter:
    api = APIRouter()
    for name in ROUTE_MODULES:
        module = importlib.import_module(f"chatmem.web.api.routes.{name}")
        api.include_router(module.router)
    return api
