"""MCP Apps' model context as stored (APPS-3): one per conversation, replaced on each update.

Rules:

* Only the owner of a live (not archived) conversation may set or clear it, and only for a
  tool call of that conversation whose tool has an app — anything else is
  :class:`~chatmem.errors.NotFound`, whoever's it is (STORE-1).
* The text the model is sent is rendered once, when stored
  (:func:`chatmem.context.app_context.render_app_context`), and counted then for every
  tokenizer, the per-message overhead included (CTX-2: planning reads the cached count).
* More than :data:`MAX_APP_CONTEXT_TOKENS` under any tokenizer is refused
  (:class:`~chatmem.errors.TooLarge`) and nothing is stored: the previous context stays.
* Setting or clearing it touches the conversation (``updated_at``, which keys its cached
  plan: :func:`chatmem.store.engine.plan_version`) and sets its ``has_app_context`` flag,
  which a turn reads with the conversation's row (no statement more when there is none).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import bindparam, delete, select, update
from sqlalchemy.orm import Session

from chatmem.context.app_context import render_app_context
from chatmem.context.tokens import MESSAGE_OVERHEAD
from chatmem.errors import NotFound, TooLarge
from chatmem.store.conversations import owned_conversation_row
from chatmem.store.tables.app_context import AppContextRow
from chatmem.store.tables.conversations import Conversation
from chatmem.store.tables.runs import ToolCallRow
from chatmem.store.token_counts import counts_for_text
from chatmem.store.types import utcnow

#: The most tokens an app's context may take in a request (ISSUE 28, contract point 7).
MAX_APP_CONTEXT_TOKENS = 4_000

_CALL = select(ToolCallRow.tool, ToolCallRow.name, ToolCallRow.server_name).where(
    ToolCallRow.id == bindparam("tid"),
    ToolCallRow.conversation_id == bindparam("cid"),
    ToolCallRow.app_uri.is_not(None),
)


def set_app_context(
    session: Session,
    user_id: str,
    conversation_id: str,
    tool_call_id: str,
    content: Sequence[Mapping[str, Any]],
    structured: Mapping[str, Any] | None,
) -> int:
    """Store the app's context in place of the conversation's previous one; answers its
    tokens (the largest count of any tokenizer: what the bound is checked against)."""
    owned_conversation_row(session, user_id, conversation_id)
    call = session.execute(_CALL, {"tid": tool_call_id, "cid": conversation_id}).first()
    if call is None:
        raise NotFound("tool call")
    tool = call.tool or call.name
    text = render_app_context(tool, call.server_name, content, structured)
    counts = {column: MESSAGE_OVERHEAD + n for column, n in counts_for_text(text).items()}
    tokens = max(counts.values())
    if tokens > MAX_APP_CONTEXT_TOKENS:
        raise TooLarge(tokens, MAX_APP_CONTEXT_TOKENS)
    row = session.get(AppContextRow, conversation_id)
    if row is None:
        row = AppContextRow(conversation_id=conversation_id)
        session.add(row)
    row.tool_call_id, row.tool, row.server_name = tool_call_id, tool, call.server_name
    row.content = [dict(block) for block in content]
    row.structured = dict(structured) if structured is not None else None
    row.text = text
    for column, n in counts.items():
        setattr(row, column, n)
    row.updated_at = utcnow()
    _flag(session, conversation_id, True)
    return tokens


def clear_app_context(session: Session, user_id: str, conversation_id: str) -> None:
    """The conversation has no app context any more (clearing none is no error)."""
    owned_conversation_row(session, user_id, conversation_id)
    gone = session.execute(
        delete(AppContextRow).where(AppContextRow.conversation_id == conversation_id)
    )
    if getattr(gone, "rowcount", 0):
        _flag(session, conversation_id, False)


def _flag(session: Session, conversation_id: str, present: bool) -> None:
    session.execute(
        update(Conversation)
        .where(Conversation.id == conversation_id)
        .values(has_app_context=present, updated_at=utcnow())
    )
