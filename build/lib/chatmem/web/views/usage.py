"""The JSON of usage and limits (USE-3 … USE-5): the usage page, a user's windows in the admin
console, extension requests and what "Request extension" did.  The figures and their rules
are :mod:`chatmem.turns.usage`'s; amounts are USD rounded to 8 places, the ring to 4."""

from __future__ import annotations

from typing import Any

from chatmem.store.ledger import ExtensionRecord
from chatmem.store.types import iso
from chatmem.turns.usage import ExtensionOutcome, UsageBrief, UsageSummary, Window


def _window_public(window: Window, extra: dict[str, Any]) -> dict[str, Any]:
    return {
        **extra,
        "spent": round(window.spent, 8),
        "included": round(window.included, 8) if window.included is not None else None,
        "resets_at": iso(window.resets_at),
    }


def usage_public(summary: UsageSummary) -> dict[str, Any]:
    """``GET /api/v1/usage``: the usage page (USE-4)."""
    return {
        "currency": "USD",
        "total": round(summary.total, 8),
        "session": _window_public(
            summary.session,
            {
                "hours": summary.limits.session_hours,
                "models": summary.session_models,
                "conversations": summary.session_conversations,
            },
        ),
        "week": _window_public(
            summary.week,
            {"models": summary.week_models, "conversations": summary.week_conversations},
        ),
        "ring": round(summary.ring, 4),
        "exhausted": summary.exhausted is not None,
        "exhausted_by": summary.exhausted,
        "fallback_profile_id": summary.fallback_profile_id,
        # USE-4: the fallback in force (only while the included usage is used up) and why.
        "fallback": (
            {
                "profile_id": summary.fallback_profile_id,
                "name": summary.fallback_name,
                "reason": summary.exhausted,
            }
            if summary.fallback_in_force
            else None
        ),
        "extension_requests": summary.extension_requests,
        "requests": [request_public(r) for r in summary.requests],
        "conversations": [
            {"conversation_id": cid, "title": title, "cost": round(float(cost), 8)}
            for cid, title, cost in summary.conversations
        ],
        "models": summary.models,
    }


def request_public(row: ExtensionRecord, user_name: str | None = None) -> dict[str, Any]:
    """An extension request as the usage page and the admin console show it."""
    body: dict[str, Any] = {
        "id": row.id,
        "user_id": row.user_id,
        "reason": row.reason or None,
        "status": row.status,
        "amount_usd": row.amount_usd,
        "scope": row.scope,
        "created_at": iso(row.created_at),
        "decided_at": iso(row.decided_at),
    }
    if user_name is not None:
        body["user_name"] = user_name
    return body


def usage_brief_public(brief: UsageBrief) -> dict[str, Any]:
    """A user's two windows as the admin console lists them (USE-5)."""
    return {
        "session": _window_public(brief.session, {"hours": brief.limits.session_hours}),
        "week": _window_public(brief.week, {}),
        "exhausted_by": brief.exhausted,
    }


def extension_public(outcome: ExtensionOutcome) -> dict[str, Any]:
    """What ``POST /api/v1/usage/extension-requests`` answers (USE-3)."""
    return {
        "notified": outcome.notified,
        "already_notified": not outcome.notified,
        "message": (
            "The administrators were notified"
            if outcome.notified
            else "Administrators were already notified"
        ),
        "requested_at": iso(outcome.requested_at),
    }
