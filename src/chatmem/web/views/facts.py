"""The JSON of a pinned fact (CTX-24)."""

from __future__ import annotations

from typing import Any

from chatmem.store.pinned_facts import PinnedFact
from chatmem.store.types import iso


def fact_public(fact: PinnedFact) -> dict[str, Any]:
    return {
        "id": fact.id,
        "conversation_id": fact.conversation_id,
        "text": fact.text,
        # The message it was selected from (or the summary's kept fact's), when it was.
        "message_id": fact.message_id,
        "created_at": iso(fact.created_at),
        "updated_at": iso(fact.updated_at),
    }
