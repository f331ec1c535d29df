"""Token counts computed once at write time, for every tokenizer (CTX-1, CTX-2).

A message is counted under each known tokenizer when it is stored, and the counts are kept in
``tokens_<name>`` columns, so planning never re-tokenizes history whatever tokenizer the
conversation's current profile uses (a conversation can switch models, STORE-2).
"""

from __future__ import annotations

from chatmem.context import tokens as engine_tokens
from chatmem.context.values import Message
from chatmem.store.tables.conversations import TOKEN_COLUMNS


def counts_for_message(message: Message) -> dict[str, int]:
    """``{"tokens_estimate": …, "tokens_o200k": …, "tokens_cl100k": …}`` for one message."""
    return {
        column: engine_tokens.count_message(message, engine_tokens.get_tokenizer(name))
        for name, column in TOKEN_COLUMNS.items()
    }


def counts_for_text(text: str) -> dict[str, int]:
    """Counts for free text (file contents, summaries): no per-message overhead."""
    return {
        column: engine_tokens.get_tokenizer(name).count(text)
        for name, column in TOKEN_COLUMNS.items()
    }


def column_for(tokenizer: str) -> str:
    """The cached-count column for a profile's tokenizer (unknown names use the estimate)."""
    return TOKEN_COLUMNS.get(tokenizer, TOKEN_COLUMNS["estimate"])
