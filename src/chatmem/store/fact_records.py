"""The fact guard's record of a summary version (CTX-24), as stored in ``summaries.facts``.

``{"held": [fact, …], "kept": [fact, …], "dropped": [fact, …], "dropped_count": n}``, each fact
``{"text", "kind", "message_id", "role", "at", "repeats"}`` (``at`` ISO 8601 or null).  The
engine's :class:`~chatmem.context.values.Fact` values go in and come out; NULL (versions
written before the guard, or a guard that kept nothing) reads as an empty record.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from chatmem.context.facts import FACT_KINDS
from chatmem.context.values import Fact


@dataclass(frozen=True, slots=True)
class FactRecord:
    kept: tuple[Fact, ...] = ()
    dropped: tuple[Fact, ...] = ()
    dropped_count: int = 0
    #: The facts the summariser's own words hold (the guard checks them again next round).
    held: tuple[Fact, ...] = ()

    def stored(self) -> dict[str, Any] | None:
        """The column's value (None when the guard did nothing)."""
        if not self.kept and not self.dropped and not self.dropped_count and not self.held:
            return None
        return {
            "held": [_fact_json(f) for f in self.held],
            "kept": [_fact_json(f) for f in self.kept],
            "dropped": [_fact_json(f) for f in self.dropped],
            "dropped_count": self.dropped_count,
        }


EMPTY = FactRecord()


def _fact_json(fact: Fact) -> dict[str, Any]:
    return {
        "text": fact.text,
        "kind": fact.kind,
        "message_id": fact.message_id,
        "role": fact.role,
        "at": fact.at.isoformat() if fact.at is not None else None,
        "repeats": fact.repeats,
    }


def _fact(item: Mapping[str, Any]) -> Fact | None:
    kind = item.get("kind")
    text = item.get("text")
    if kind not in FACT_KINDS or not isinstance(text, str):
        return None
    at = item.get("at")
    return Fact(
        text=text,
        kind=kind,
        message_id=str(item.get("message_id") or ""),
        role=str(item.get("role") or "assistant"),
        at=datetime.fromisoformat(at) if isinstance(at, str) else None,
        repeats=int(item.get("repeats") or 1),
    )


def _facts(items: Any) -> tuple[Fact, ...]:
    if not isinstance(items, Sequence):
        return ()
    facts = (_fact(item) for item in items if isinstance(item, Mapping))
    return tuple(fact for fact in facts if fact is not None)


def read_record(value: Mapping[str, Any] | None) -> FactRecord:
    """The record from the column's value."""
    if not value:
        return EMPTY
    dropped = _facts(value.get("dropped"))
    count = value.get("dropped_count")
    return FactRecord(
        kept=_facts(value.get("kept")),
        dropped=dropped,
        dropped_count=count if isinstance(count, int) else len(dropped),
        held=_facts(value.get("held")),
    )
