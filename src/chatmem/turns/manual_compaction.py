"""Manual compaction, "Compress now" (CTX-11, CTX-12): what it would fold and its price.

The fold is the engine's manual one, planned on the profile that would answer now, never a
refusal (:func:`~chatmem.turns.admission.planned_public`).  A stateless profile remembers
nothing, so there is nothing to compress (CTX-7).  The fold itself (:func:`compact_now`)
runs under the conversation's lock (:meth:`TurnService.compact`), after the spend check.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from chatmem import context as engine
from chatmem.context.fact_guard import FactMemo
from chatmem.context.values import Mode
from chatmem.errors import NothingToCompress
from chatmem.models.clients import ModelClients
from chatmem.security.secret_box import SecretBox
from chatmem.settings import Settings
from chatmem.store.db import Database
from chatmem.store.engine import StepConversation
from chatmem.store.sessions import Connection, Session
from chatmem.store.units import read
from chatmem.turns.admission import planned_public
from chatmem.turns.compaction import run_fold
from chatmem.turns.inputs import Calibrations, TurnInputs, load_inputs
from chatmem.turns.usage import check_can_spend


def compaction_plan(
    session: Session,
    user_id: str,
    conversation_id: str,
    focus: str | None,
    *,
    settings: Settings,
    calibrations: Calibrations,
    secrets: SecretBox | None = None,
    materialize: bool = False,
) -> tuple[TurnInputs, engine.CompactionRequest | None]:
    """CTX-11: what "Compress now" would fold (the engine's manual fold), and the inputs;
    ``materialize`` with ``secrets``: inputs the fold can run with (the price needs
    neither)."""

    def choose(
        connection: Session | Connection, conversation: StepConversation
    ) -> tuple[str | None, Mapping[str, Any]]:
        return planned_public(connection, conversation, settings)

    inputs = load_inputs(
        session,
        conversation_id,
        user_id=user_id,
        with_plan=False,
        secrets=secrets,
        materialize=materialize,
        calibrations=calibrations,
        choose=choose,
    )
    if inputs.profile.stateless:
        return inputs, None  # CTX-7: nothing is remembered, so nothing is compressed
    request = engine.compaction_request(
        inputs.conversation,
        inputs.profile,
        mode=cast(Mode, inputs.mode),
        focus=focus,
        manual=True,
        tokenizer=inputs.tokenizer,
    )
    return inputs, request


def price_public(request: engine.CompactionRequest | None) -> dict[str, Any]:
    """The price shown on the button before it runs (CTX-11)."""
    if request is None:
        return {
            "available": False,
            "price": 0.0,
            "currency": "USD",
            "message": "Nothing to compress yet",
        }
    return {
        "available": True,
        "price": round(float(request.estimated_cost), 8),
        "currency": "USD",
        "message_count": int(request.message_count),
        "rounds": int(request.rounds),
    }


async def compaction_price(
    db: Database,
    settings: Settings,
    user_id: str,
    conversation_id: str,
    focus: str | None,
    *,
    calibrations: Calibrations,
) -> dict[str, Any]:
    """The price of "Compress now", shown on the button before it runs (CTX-11)."""
    _, request = await read(
        db,
        compaction_plan,
        user_id,
        conversation_id,
        focus,
        settings=settings,
        calibrations=calibrations,
    )
    return price_public(request)


async def compact_now(
    db: Database,
    settings: Settings,
    user_id: str,
    conversation_id: str,
    focus: str | None,
    *,
    calibrations: Calibrations,
    secrets: SecretBox,
    clients: ModelClients,
    facts: FactMemo | None = None,
) -> dict[str, Any]:
    """ "Compress now" (CTX-11, CTX-12), the caller holding the conversation's lock: folds
    early messages into a summary, keeping the last question–answer pair.  Refusals:
    ``nothing_to_compress``, ``insufficient_credits`` (before any model call)."""
    inputs, request = await read(
        db,
        compaction_plan,
        user_id,
        conversation_id,
        focus,
        settings=settings,
        calibrations=calibrations,
        secrets=secrets,
        materialize=True,
    )
    if request is None:
        raise NothingToCompress()
    await read(db, check_can_spend, user_id, settings, float(request.estimated_cost))
    outcome = await run_fold(
        db,
        settings,
        inputs,
        kind="compaction",
        user_id=user_id,
        focus=focus,
        manual=True,
        clients=clients,
        facts=facts,
    )
    if outcome is None:
        raise NothingToCompress()
    price = round(float(request.estimated_cost), 8)
    return {**outcome.public(), "price": price, "currency": "USD"}
