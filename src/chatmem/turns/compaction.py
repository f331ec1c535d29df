"""Running a compaction the engine asked for (CTX-4, CTX-5, CTX-9 … CTX-12).

The engine describes the work (:class:`chatmem.context.CompactionRequest`: the summariser
prompt, the range it covers); this module makes the model call through the summariser
profile and stores the result.  Atomicity is the whole point (CTX-12): nothing is written
until the summary text is in hand, and then the new summary version and its ledger row are
written in one transaction.  A provider error, a timeout, a stop or a killed process
therefore leave the previous summary and the history exactly as they were.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import anyio
from sqlalchemy import func, select

from chatmem.errors import ProviderError, ProviderUnreachable
from chatmem.models.client import ModelClient
from chatmem.models.ssrf import EndpointPolicy
from chatmem.settings import Settings
from chatmem.store.db import Database
from chatmem.store.tables.conversations import Summary
from chatmem.store.tokens import counts_for_text
from chatmem.store.types import utcnow
from chatmem.turns import runs
from chatmem.turns.dbwork import work
from chatmem.turns.inputs import ModelTarget, TurnInputs, price

MARKER = "Memory compressed — {n} earlier messages summarised"


@dataclass(frozen=True)
class CompactionOutcome:
    summary_id: str
    version: int
    through: str
    message_count: int
    cost: float
    text: str
    focus: str | None

    def event_data(self) -> dict[str, Any]:
        return {
            "message": MARKER.format(n=self.message_count),
            "count": self.message_count,
            "summary_id": self.summary_id,
            "summary_version": self.version,
            "through": self.through,
            "cost": round(self.cost, 8),
        }

    def public(self) -> dict[str, Any]:
        return {**self.event_data(), "summary": self.text, "focus": self.focus}


def client_for(target: ModelTarget, settings: Settings) -> ModelClient:
    if target.endpoint is None:
        raise ProviderError("This conversation has no model profile: choose a model for it first.")
    return ModelClient(
        target.endpoint, EndpointPolicy.from_settings(settings), timeout=settings.model_timeout
    )


class ModelClients:
    """Model clients shared across turns, one per endpoint (URL, model, key).

    Building a client builds its TLS context and connection pool, which costs tens of
    milliseconds — more than the whole server overhead we allow on the first token — so the
    turn service keeps them for the life of the app and closes them on shutdown.
    """

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._clients: dict[tuple[str, str, str | None], ModelClient] = {}

    def __call__(self, target: ModelTarget) -> ModelClient:
        if target.endpoint is None:
            return client_for(target, self._settings)  # raises the clear error
        key = (target.endpoint.base_url, target.endpoint.model, target.endpoint.api_key)
        client = self._clients.get(key)
        if client is None:
            client = self._clients[key] = client_for(target, self._settings)
        return client

    async def aclose(self) -> None:
        clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            await client.aclose()


async def run_compaction(
    db: Database,
    settings: Settings,
    inputs: TurnInputs,
    *,
    request: Any,
    kind: str,
    user_id: str,
    run_id: str | None = None,
    focus: str | None = None,
    clients: ModelClients | None = None,
) -> CompactionOutcome:
    """Summarise through the summariser profile and store a new summary version."""
    target = inputs.summarizer
    client = clients(target) if clients is not None else client_for(target, settings)
    try:
        with anyio.fail_after(settings.model_timeout):
            completion = await client.complete(list(request.prompt))
    except TimeoutError:
        raise ProviderUnreachable(
            "The summariser did not answer in time; memory is unchanged."
        ) from None
    finally:
        if clients is None:
            await client.aclose()
    text = completion.text.strip()
    if not text:
        raise ProviderError("The summariser returned an empty summary; memory is unchanged.")
    prompt_tokens = completion.usage.prompt_tokens if completion.usage else 0
    completion_tokens = completion.usage.completion_tokens if completion.usage else 0
    cost = price(target.engine_profile.prices, prompt_tokens, completion_tokens)

    def store(session: Any) -> CompactionOutcome:
        version = (
            session.scalar(
                select(func.max(Summary.version)).where(
                    Summary.conversation_id == inputs.conversation_id
                )
            )
            or 0
        ) + 1
        row = Summary(
            conversation_id=inputs.conversation_id,
            version=version,
            first_message_id=getattr(request, "first_id", None),
            through_message_id=request.through,
            message_count=int(getattr(request, "message_count", 0)),
            text=text,
            focus=focus,
            cost=cost,
            model=target.model,
            created_at=utcnow(),
            **counts_for_text(text),
        )
        session.add(row)
        runs.record_usage(
            session,
            user_id=user_id,
            conversation_id=inputs.conversation_id,
            run_id=run_id,
            kind=kind,
            profile_id=target.profile_id,
            model=target.model,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            cost=cost,
        )
        session.flush()
        return CompactionOutcome(
            summary_id=row.id,
            version=version,
            through=request.through,
            message_count=row.message_count,
            cost=cost,
            text=text,
            focus=focus,
        )

    return await work(db, store)
