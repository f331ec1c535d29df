"""STORE-1: another user's ids answer exactly like missing ids, on every route, changing nothing.

The test walks ``app.routes``: every route with a path parameter is called by a second user
with the first user's real ids (and, for comparison, with an id that exists nowhere).  New
routes are covered automatically; bodies are built from each route's body model.  A route
whose body needs more than generic values can be given one in ``BODY_OVERRIDES``.
"""

from __future__ import annotations

import re
from typing import Any, get_args, get_origin

import pytest
from fastapi import routing
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient
from pydantic import BaseModel
from sqlalchemy import MetaData, select
from tests.support.app import ApiUser, make_user

from chatmem.store.db import Database

# (method, path template) -> JSON body, for bodies generic values cannot satisfy.
BODY_OVERRIDES: dict[tuple[str, str], Any] = {
    # Parsed by hand (multipart or JSON), so the route declares no body model.
    ("POST", "/api/v1/conversations/{conversation_id}/files"): {"name": "a.txt", "content": "x"},
}

PARAM = re.compile(r"{([^}:]+)(?::[^}]*)?}")


def _value_for(annotation: Any) -> Any:
    origin = get_origin(annotation)
    if origin is not None:
        args = [a for a in get_args(annotation) if a is not type(None)]
        if origin in (list, tuple, set, frozenset):
            return []
        if origin is dict:
            return {}
        return _value_for(args[0]) if args else None
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return generic_body(annotation)
    return {str: "x", bool: False, int: 1, float: 1.0}.get(annotation, "x")


def generic_body(model: type[BaseModel]) -> dict[str, Any]:
    """A body with every required field given a plain value of its type."""
    return {
        name: _value_for(field.annotation)
        for name, field in model.model_fields.items()
        if field.is_required()
    }


def _body_for(route: APIRoute, path: str, method: str) -> Any:
    if (method, path) in BODY_OVERRIDES:
        return BODY_OVERRIDES[(method, path)]
    field = route.body_field
    if field is None:
        return None
    annotation = field.field_info.annotation
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return generic_body(annotation)
    return _value_for(annotation)


def _snapshot(db: Database) -> dict[str, list[tuple[Any, ...]]]:
    metadata = MetaData()
    metadata.reflect(db.engine)
    with db.engine.connect() as conn:
        return {
            name: sorted((tuple(map(repr, row)) for row in conn.execute(select(table))), key=repr)
            for name, table in metadata.tables.items()
            if not name.startswith("messages_fts")
        }


def _seed(client: TestClient, owner: ApiUser) -> dict[str, str]:
    """Real objects of every kind the owner can have, by kind."""
    h = owner.headers
    folder = client.post("/api/v1/folders", json={"name": "F"}, headers=h).json()["id"]
    conversation = client.post(
        "/api/v1/conversations", json={"title": "secret", "folder_id": folder}, headers=h
    ).json()["id"]
    message = client.post(
        f"/api/v1/conversations/{conversation}/messages",
        json={"role": "user", "content": "secret question"},
        headers=h,
    ).json()["id"]
    file = client.post(
        f"/api/v1/conversations/{conversation}/files",
        json={"name": "a.txt", "content": "secret file"},
        headers=h,
    ).json()["id"]
    return {"conversation": conversation, "folder": folder, "message": message, "file": file}


def _ids_for(param: str, ids: dict[str, str]) -> list[str]:
    kind = param.removesuffix("_id")
    if kind in ids:
        return [ids[kind]]
    return list(ids.values())  # unknown parameter: try every kind of foreign id


@pytest.mark.parametrize("stranger_is_admin", [False, True], ids=["user", "admin"])
def test_store1_foreign_ids_answer_like_missing_ids_on_every_route(
    client: TestClient, user: ApiUser, stranger_is_admin: bool
) -> None:
    """Identical answers for a foreign and a missing id on every route with an id in its path;
    on the API that answer is 404 ``not_found`` wherever the id is looked up at all (routes
    refusing the caller outright, e.g. admin-only ones, refuse both alike).  Administrators
    do not see other users' conversations either."""
    stranger = make_user(client, "stranger", admin=stranger_is_admin)
    ids = _seed(client, user)
    db: Database = client.app.state.db  # type: ignore[attr-defined]
    before = _snapshot(db)
    checked = not_found = 0
    for context in routing.iter_route_contexts(client.app.routes):  # type: ignore[attr-defined]
        route = context.route
        if not isinstance(route, APIRoute):
            continue
        params = PARAM.findall(context.path)
        if not params:
            continue
        for method in sorted(set(context.methods or ()) - {"HEAD"}):
            body = _body_for(route, context.path, method)
            for param in params:
                for foreign in _ids_for(param, ids):
                    path, missing = context.path, context.path
                    for p in params:
                        value = foreign if p == param else ids.get(p.removesuffix("_id"), foreign)
                        path = path.replace("{" + p + "}", value)
                        missing = missing.replace("{" + p + "}", "0" * 32 if p == param else value)
                    kwargs: dict[str, Any] = {"headers": stranger.headers}
                    if body is not None:
                        kwargs["json"] = body
                    got = client.request(method, path, **kwargs)
                    want = client.request(method, missing, **kwargs)
                    where = f"{method} {context.path} ({param}={foreign})"
                    # Exactly like a missing id: same status, same body (ids aside).
                    assert got.status_code == want.status_code, (
                        f"{where}: {got.status_code} {got.text}"
                    )
                    assert got.text.replace(foreign, "0" * 32) == want.text, where
                    if got.status_code == 404 and context.path.startswith("/api/"):
                        assert got.json()["error"]["code"] == "not_found", where
                        not_found += 1
                    checked += 1
    assert not_found >= 12  # the walk really reached the storage routes' ownership checks
    assert _snapshot(db) == before


def test_store1_foreign_conversations_never_listed_or_found(
    client: TestClient, user: ApiUser, other_user: ApiUser
) -> None:
    _seed(client, user)
    listed = client.get("/api/v1/conversations", headers=other_user.headers).json()
    assert listed["items"] == []
    searched = client.get(
        "/api/v1/conversations", params={"q": "secret"}, headers=other_user.headers
    )
    assert searched.json()["items"] == []
    assert client.get("/api/v1/folders", headers=other_user.headers).json()["items"] == []
