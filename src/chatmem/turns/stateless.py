"""``store: false`` (API-1): an answer that leaves nothing stored.

OpenAI's clients send ``store: false`` for what is not a chat — a title, tags, a follow-up
suggestion, an autocomplete.  chatmem then answers without a conversation: no conversation,
message or run is written, before or after, and nothing is shown in the UI.  What stays is
what the answer cost — one ``answer`` row in the usage ledger (USE-1, no conversation or run)
— and the limits apply as to a turn: the profile that answers is chosen as for a turn
(USE-3 fallback, USE-4 Auto), and a user whose included usage is used up on a paid profile
with no fallback is refused with ``insufficient_credits`` before the provider is called.

The request sent is the client's messages as given (there is no stored history to plan,
fold or window), its function tools (chatmem's own MCP tools are a conversation's, and not
offered), and its options.  It is not a run: it has no run id, cannot be watched from another
connection or stopped through ``/api/v1/runs``; closing the connection stops it, and what the
provider produced until then is billed (counted when it reported nothing, PROV-1).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

import anyio

from chatmem import context as engine
from chatmem.context.values import Message as EngineMessage
from chatmem.context.values import Role
from chatmem.context.values import ToolCall as CallValue
from chatmem.errors import ChatmemError, InvalidInput
from chatmem.models.stream import Finish, ReasoningDelta, TextDelta, ToolCallEvent, Usage
from chatmem.settings import Settings
from chatmem.store.db import Database
from chatmem.store.ledger import record_usage
from chatmem.store.profiles import visible_profile
from chatmem.store.sessions import Session
from chatmem.store.types import new_id
from chatmem.store.units import read, work
from chatmem.turns.answerer import answering_profile
from chatmem.turns.events import Delta, Done, Error, Reasoning, RunEvent, ToolCall
from chatmem.turns.history_match import Said
from chatmem.turns.history_turns import HistoryTurn, find_profile
from chatmem.turns.inputs import ModelTarget, price, resolve_target
from chatmem.turns.metering import counted_answer

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Stateless:
    """What a stateless answer needs, read in one short transaction."""

    user_id: str
    target: ModelTarget
    #: The answering profile's name (what ``model`` reports back).
    name: str
    tokenizer: Any
    #: The request's tokens as the profile's tokenizer counts them (PROV-1's fallback).
    prompt_tokens: int


def request_messages(messages: Sequence[Said]) -> list[dict[str, Any]]:
    """The client's messages in the Chat Completions shape the provider is sent."""
    out: list[dict[str, Any]] = []
    for said in messages:
        message: dict[str, Any] = {"role": said.role, "content": said.content}
        if said.role == "tool":
            message["tool_call_id"] = said.tool_call_id
        elif said.tool_calls:
            message["tool_calls"] = [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": c.arguments},
                }
                for c in said.tool_calls
            ]
        out.append(message)
    return out


def prepare(
    session: Session,
    settings: Settings,
    secrets: Any,
    user_id: str,
    profile_id: str,
    messages: Sequence[Said],
) -> Stateless:
    """The profile that answers (as for a turn: USE-3, USE-4, refusing what a turn would be
    refused) with its endpoint, and the request's token count."""
    answerer = answering_profile(session, user_id, profile_id, settings)
    target = resolve_target(session, user_id, answerer.profile_id, secrets)
    if target.profile_id is None or target.endpoint is None:
        raise InvalidInput("model: no model profile answers this request")
    record = visible_profile(session, user_id, target.profile_id)
    tokenizer = engine.get_tokenizer(target.engine_profile.tokenizer)
    counted = 0
    for i, said in enumerate(messages):
        value = EngineMessage(
            id=str(i), role=cast(Role, said.role), content=said.content, tool_calls=said.tool_calls
        )
        counted += engine.count_message(value, tokenizer)
    name = record.name if record is not None else str(target.model or "")
    return Stateless(user_id, target, name, tokenizer, counted)


#: Records one ledger row (``record_usage``'s keywords) in a unit of work.
Record = Callable[[dict[str, Any]], Awaitable[None]]


@dataclass
class _Tally:
    parts: list[str]
    thoughts: list[str]
    calls: list[CallValue]
    usage: Usage | None = None
    finish: str | None = None

    def ledger(self, prepared: Stateless) -> dict[str, Any]:
        """The ledger row of what the provider produced (PROV-1: counted when unreported)."""
        reported = self.usage
        prompt = reported.prompt_tokens if reported and reported.prompt_tokens > 0 else 0
        completion = reported.completion_tokens if reported else 0
        estimated = prompt <= 0 or completion <= 0
        text = "".join(self.thoughts) + "".join(self.parts)
        prompt = prompt or prepared.prompt_tokens
        completion = completion or counted_answer(prepared.tokenizer, text, self.calls)
        target = prepared.target
        return dict(
            user_id=prepared.user_id,
            conversation_id=None,
            run_id=None,
            kind="answer",
            profile_id=target.profile_id,
            model=target.model,
            prompt_tokens=prompt,
            completion_tokens=completion,
            cost=price(target.engine_profile.prices, prompt, completion),
            estimated_prompt_tokens=prepared.prompt_tokens,
            estimated=estimated,
        )


async def stateless_events(
    client: Any,
    prepared: Stateless,
    messages: Sequence[Said],
    tools: Sequence[Mapping[str, Any]],
    options: Mapping[str, Any] | None,
    record: Record,
) -> AsyncIterator[RunEvent]:
    """The answer as run events (``delta``, ``reasoning``, client ``tool_call``, then
    ``done`` or ``error``), numbered as a run's; its ledger row is written when it ends,
    however it ends (shielded: a client that goes still pays for what was produced)."""
    tally = _Tally([], [], [])
    seq = 0
    try:
        async for event in client.stream(
            request_messages(messages), tools=list(tools) or None, extra=options or None
        ):
            if isinstance(event, TextDelta):
                seq += 1
                tally.parts.append(event.text)
                yield Delta(seq, event.text, 0)
            elif isinstance(event, ReasoningDelta):
                seq += 1
                tally.thoughts.append(event.text)
                yield Reasoning(seq, event.text, 0)
            elif isinstance(event, ToolCallEvent):
                seq += 1
                call = event.call
                tally.calls.append(call)
                yield ToolCall(seq, call.id, call.name, call.arguments, None, None, client=True)
            elif isinstance(event, Usage):
                tally.usage = event
            elif isinstance(event, Finish):
                tally.finish = event.reason
    except ChatmemError as exc:
        await _record(record, tally, prepared)
        yield Error(seq + 1, exc.code, exc.message or str(exc))
        return
    except Exception:
        log.exception("a stateless answer failed")
        await _record(record, tally, prepared)
        yield Error(seq + 1, "internal_error", "The answer failed on the server.")
        return
    except BaseException:  # the client went (the generator is closed) or shutdown
        await _record(record, tally, prepared)
        raise
    row = await _record(record, tally, prepared)
    usage = {"prompt_tokens": row["prompt_tokens"], "completion_tokens": row["completion_tokens"]}
    answered = {"profile_id": prepared.target.profile_id, "name": prepared.name}
    yield Done(seq + 1, "completed", None, None, usage, row["cost"], answered, tally.finish)


async def _record(record: Record, tally: _Tally, prepared: Stateless) -> dict[str, Any]:
    row = tally.ledger(prepared)
    if tally.parts or tally.thoughts or tally.calls or tally.usage is not None:
        with anyio.CancelScope(shield=True), contextlib.suppress(Exception):
            await record(row)
    return row


async def answer(
    db: Database,
    settings: Settings,
    secrets: Any,
    clients: Callable[[Any], Any],
    user_id: str,
    messages: Sequence[Said],
    model: str,
    *,
    tools: Sequence[Mapping[str, Any]],
    options: Mapping[str, Any] | None,
) -> HistoryTurn:
    """A stateless answer as a history turn (``TurnService.submit_history(store=False)``):
    refused now as a turn would be (the model, the included usage); its events in
    ``events`` — ``run_id`` names nothing stored and ``conversation_id`` is empty."""
    profile_id = await read(db, find_profile, user_id, model)
    prepared = await read(db, prepare, settings, secrets, user_id, profile_id, messages)

    async def record(row: dict[str, Any]) -> None:
        await work(db, record_usage, **row)

    client = clients(prepared.target.endpoint)
    events = stateless_events(client, prepared, messages, tools, options, record)
    return HistoryTurn(new_id(), "", prepared.name, events=events)
