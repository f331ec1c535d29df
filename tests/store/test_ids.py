"""``new_ids``: a batch of ids of ``new_id``'s kind (an import names thousands of messages at
once) — random version-4 UUIDs in hex, all different."""

from __future__ import annotations

import uuid

from chatmem.store.types import new_id, new_ids


def test_a_batch_of_ids_is_version_4_uuids_in_hex_all_different() -> None:
    ids = new_ids(5_000)
    assert len(ids) == len(set(ids)) == 5_000
    for text in [*ids, new_id()]:
        parsed = uuid.UUID(hex=text)
        assert parsed.hex == text and len(text) == 32
        assert parsed.version == 4 and parsed.variant == uuid.RFC_4122
    assert new_ids(0) == []
