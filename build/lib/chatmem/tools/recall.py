"""The ``recall`` tool in a turn (issue 17): the call is made here, not on an MCP server.

The engine decides what recall may return and how long its answer may be
(:mod:`chatmem.context.recall`); the store finds the matches (:mod:`chatmem.store.recall`).
This module joins the two for the runner: :meth:`Recall.box` wraps a step's toolbox so a
``recall`` call is answered from this conversation, while every other call goes to its MCP
server as before.  The call and its result are recorded and stored like any tool call
(``tool_calls`` row without a server, a ``tool`` message, ``tool_call`` / ``tool_result``
events), so the feed and the administrators' list show it.

Each call searches what the step's plan does not send (its statuses), and what earlier
``recall`` calls of the same turn returned is not returned again (it is in the request now).
The result is bounded by the tokens the window has free (:func:`result_budget`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import anyio.to_thread

from chatmem.context import Plan, Profile, Tokenizer, get_tokenizer
from chatmem.context.recall import (
    DEFAULT_LIMIT,
    MAX_LIMIT,
    RECALL_TOOL,
    recall_scope,
    render_recall,
    result_budget,
)
from chatmem.store.db import Database
from chatmem.store.recall import recall_hits
from chatmem.store.units import read
from chatmem.tools.toolbox import ToolBox, ToolOutcome, ToolRoute

#: The longest query a call may send (characters).
MAX_QUERY_CHARS = 500


class RecallStep(Protocol):
    """What recall reads of a turn's step (the turn's inputs): whether it offered ``recall``,
    its plan (what it sends, what it has free), its tool schemas and its tokenizer."""

    @property
    def recall(self) -> bool: ...

    @property
    def plan(self) -> Plan: ...

    @property
    def tools(self) -> Sequence[Mapping[str, Any]]: ...

    @property
    def tokenizer(self) -> Tokenizer | None: ...

    @property
    def profile(self) -> Profile: ...


def parse_arguments(arguments: str) -> tuple[str, int] | str:
    """The call's ``(query, limit)``, or what is wrong with its arguments."""
    try:
        args = json.loads(arguments or "{}")
    except ValueError:
        return "The recall arguments were not valid JSON."
    if not isinstance(args, dict):
        return "The recall arguments must be a JSON object."
    query = args.get("query")
    if not isinstance(query, str) or not query.strip():
        return 'recall needs a "query": the words to look for.'
    limit = args.get("limit", DEFAULT_LIMIT)
    if limit is None:
        limit = DEFAULT_LIMIT
    if isinstance(limit, bool) or not isinstance(limit, (int, float)):
        return f'"limit" must be a whole number from 1 to {MAX_LIMIT}.'
    return query.strip()[:MAX_QUERY_CHARS], max(1, min(MAX_LIMIT, int(limit)))


class Recall:
    """The recall tool of one turn: it remembers what it returned in this turn."""

    def __init__(self, db: Database, conversation_id: str) -> None:
        self._db = db
        self._conversation_id = conversation_id
        self._returned: set[str] = set()

    def box(self, toolbox: ToolBox, inputs: RecallStep) -> ToolBox:
        """``toolbox`` with ``recall`` answered here when the step offered it."""
        return _RecallBox(toolbox, self, inputs) if inputs.recall else toolbox

    async def call(self, arguments: str, inputs: RecallStep) -> ToolOutcome:
        parsed = parse_arguments(arguments)
        if isinstance(parsed, str):
            return ToolOutcome(parsed, is_error=True)
        query, limit = parsed
        scope = recall_scope(inputs.plan.status)
        hits = await read(
            self._db,
            recall_hits,
            self._conversation_id,
            query,
            scope,
            limit,
            exclude=frozenset(self._returned),
        )
        tokenizer = inputs.tokenizer or get_tokenizer(inputs.profile.tokenizer)
        budget = result_budget(inputs.plan.tokens.free)
        # Counting and cutting long messages is CPU work: off the event loop.
        text = await anyio.to_thread.run_sync(render_recall, query, hits, budget, tokenizer)
        self._returned.update(hit.message_id for hit in hits if hit.message_id in text)
        return ToolOutcome(text)


class _RecallBox(ToolBox):
    """A step's toolbox with ``recall`` in front of it."""

    def __init__(self, inner: ToolBox, recall: Recall, inputs: RecallStep) -> None:
        self._inner = inner
        self._recall = recall
        self._inputs = inputs
        self.schemas = inputs.tools

    def route(self, name: str) -> ToolRoute | None:
        return None if name == RECALL_TOOL else self._inner.route(name)

    async def call(self, name: str, arguments: str) -> ToolOutcome:
        if name == RECALL_TOOL:
            return await self._recall.call(arguments, self._inputs)
        return await self._inner.call(name, arguments)

    async def aclose(self) -> None:
        return None  # the inner box belongs to the turn, which closes it
