"""Migration 0007: cached estimate counts are recounted after the estimate changed (CTX-1,
CTX-2, issue 11), binary attachments and image input get their columns."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from sqlalchemy import text

from chatmem.context import Message, ToolCall, count_message, get_tokenizer
from chatmem.store.db import Database
from chatmem.store.migrations import alembic_config

ORDER_NUMBERS = "\n".join(f"{723347347957 + 7919 * i} {18470054 + i}" for i in range(200))


def _upgrade(db: Database, revision: str) -> None:
    with db.engine.begin() as connection:
        config = alembic_config()
        config.attributes["connection"] = connection
        command.upgrade(config, revision)


def test_0007_recounts_stale_estimates_of_messages_summaries_and_files(tmp_path: Path) -> None:
    db = Database(f"sqlite:///{tmp_path}/old.db")
    _upgrade(db, "0006_usage_estimated")
    stale = 5  # what the old estimate (or anything stale) left in the rows
    call = '[{"id": "c1", "name": "orders", "arguments": "{\\"since\\": 20260101}"}]'
    with db.engine.begin() as c:
        c.execute(
            text(
                "INSERT INTO users (id, name, password_hash, is_admin, evicted_conversations, "
                "evicted_messages, created_at) VALUES ('u1', 'ann', 'x', 0, 0, 0, "
                "'2026-01-01 00:00:00')"
            )
        )
        c.execute(
            text(
                "INSERT INTO conversations (id, user_id, title, pinned, mode, instructions, "
                "created_at, updated_at, last_active_at) VALUES ('c1', 'u1', '', 0, 'full', '', "
                "'2026-01-01 00:00:00', '2026-01-01 00:00:00', '2026-01-01 00:00:00')"
            )
        )
        for seq, (mid, role, content, calls, call_id) in enumerate(
            [
                ("m1", "user", "List the orders", None, None),
                ("m2", "assistant", "", call, None),
                ("m3", "tool", ORDER_NUMBERS, None, "c1"),
            ],
            start=1,
        ):
            c.execute(
                text(
                    "INSERT INTO messages (id, conversation_id, seq, role, content, created_at, "
                    "tokens_estimate, tokens_o200k, tokens_cl100k, tool_calls, tool_call_id, "
                    "excluded) VALUES (:id, 'c1', :seq, :role, :content, "
                    "'2026-01-01 00:00:00', :t, 7, 7, :calls, :call_id, 0)"
                ),
                {
                    "id": mid,
                    "seq": seq,
                    "role": role,
                    "content": content,
                    "t": stale,
                    "calls": calls,
                    "call_id": call_id,
                },
            )
        c.execute(
            text(
                "INSERT INTO summaries (id, conversation_id, version, first_message_id, "
                "through_message_id, message_count, text, cost, tokens_estimate, tokens_o200k, "
                "tokens_cl100k, created_at) VALUES ('s1', 'c1', 1, 'm1', 'm1', 1, :text, 0, "
                ":t, 7, 7, '2026-01-01 00:00:00')"
            ),
            {"text": ORDER_NUMBERS, "t": stale},
        )
        c.execute(
            text(
                "INSERT INTO files (id, conversation_id, message_id, name, content, state, size, "
                "tokens_estimate, tokens_o200k, tokens_cl100k, created_at) VALUES ('f1', 'c1', "
                "'m1', 'orders.txt', :text, 'auto', 1, :t, 7, 7, '2026-01-01 00:00:00')"
            ),
            {"text": ORDER_NUMBERS, "t": stale},
        )
    db.migrate()
    estimate = get_tokenizer("estimate")
    with db.engine.connect() as c:
        counts = dict(c.execute(text("SELECT id, tokens_estimate FROM messages")).all())
        summary = c.execute(text("SELECT tokens_estimate, tokens_o200k FROM summaries")).one()
        file = c.execute(text("SELECT tokens_estimate, mime, data FROM files")).one()
        accepts = c.execute(text("SELECT count(*) FROM profiles WHERE accepts_images")).scalar()
    db.dispose()
    assert counts["m1"] == count_message(Message("m1", "user", "List the orders"), estimate)
    assert counts["m2"] == count_message(
        Message(
            "m2", "assistant", "", tool_calls=(ToolCall("c1", "orders", '{"since": 20260101}'),)
        ),
        estimate,
    )
    assert counts["m3"] == count_message(
        Message("m3", "tool", ORDER_NUMBERS, tool_call_id="c1"), estimate
    )
    digits = sum(ch.isdigit() for ch in ORDER_NUMBERS)
    assert counts["m3"] > digits  # one token per digit at least (issue 11)
    assert summary == (estimate.count(ORDER_NUMBERS), 7)  # only the estimate is recounted
    assert file == (estimate.count(ORDER_NUMBERS), None, None)
    assert accepts == 0
