"""The JSON of answer and question versions (PROJ-3): where a message stands among its
slot's versions, and a question's failed turn."""

from __future__ import annotations

from typing import Any

from chatmem.store.versions import FailedTurn, VersionOf

#: The version fields of a message that has no other version (PROJ-3).
SINGLE: dict[str, Any] = {"version": 1, "versions": 1, "version_kind": None}


def version_public(place: VersionOf | None) -> dict[str, Any]:
    """A message's version fields; :data:`SINGLE` when its slot has no other version."""
    if place is None:
        return SINGLE
    return {"version": place.index, "versions": place.count, "version_kind": place.kind}


def failure_public(failure: FailedTurn | None) -> dict[str, Any] | None:
    """The error a question's last turn failed with (None: it did not fail)."""
    if failure is None:
        return None
    return {"run_id": failure.run_id, "code": failure.code, "message": failure.message}
