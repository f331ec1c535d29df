"""What a plan says (CTX-14, CTX-17..CTX-19, CTX-21): its values and the CONTRACT's plan JSON.

:class:`Plan` is the planner's answer (:func:`chatmem.context.plan.plan`); :meth:`Plan.to_dict`
is the one place its JSON document is written.  :meth:`Plan.require_fit` is admission: a plan
that does not fit raises (CTX-19), naming the tool result when one is what cannot fit.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from chatmem.context.compaction import CompactionRequest
from chatmem.context.errors import DoesNotFit, ToolResultTooLarge
from chatmem.context.prices import PriceEstimate
from chatmem.context.values import FileStatus, Level, MessageStatus, Mode

# CTX-17: (upper bound of used/window, level), checked in order; above the last bound: red.
LEVELS: tuple[tuple[float, Level], ...] = (
    (0.5, "muted"),  # below 50 %
    (0.75, "light"),  # 50 % to 75 %
)


def level_for(used: int, window: int) -> Level:
    share = used / window if window > 0 else 1.0
    if share < LEVELS[0][0]:
        return LEVELS[0][1]
    if share <= LEVELS[1][0]:
        return LEVELS[1][1]
    return "red"


@dataclass(frozen=True)
class Breakdown:
    """CTX-18's token breakdown of the next request."""

    instructions: int
    tools: int
    summary: int
    messages: int
    files: int
    images: int
    reserve: int
    free: int
    used: int
    window: int
    #: APPS-3: an app's model context (the "Apps" row).
    apps: int = 0
    #: CTX-24: the pinned facts (the "Pinned facts" row).
    facts: int = 0


@dataclass(frozen=True)
class CompactionDecision:
    needed: bool
    threshold: int
    request: CompactionRequest | None = None

    def to_dict(self) -> dict[str, Any]:
        request = self.request
        return {
            "needed": self.needed,
            "threshold": self.threshold,
            "messages": request.message_count if request is not None else 0,
            "covered": request.covered if request is not None else 0,
            "rounds": request.rounds if request is not None else 0,
        }


@dataclass(frozen=True)
class OversizedResult:
    """CTX-13: a tool result of the turn in progress that cannot be sent even with everything
    else folded away.  The plan leaves it out with its call (CTX-20) and does not fit;
    ``needed`` is the smallest request with it (answer reserve included), above the window."""

    message_id: str
    tool_call_id: str
    tool: str
    tokens: int
    needed: int


@dataclass(frozen=True)
class Plan:
    """What the next request sends and why.  ``messages`` are OpenAI chat messages."""

    mode: Mode
    #: The request fits the window, after the planned fold when there is one (CTX-21):
    #: admission is exactly this.
    fits: bool
    messages: tuple[dict[str, Any], ...]
    status: Mapping[str, MessageStatus]
    files: Mapping[str, FileStatus]
    tokens: Breakdown
    level: Level
    compaction: CompactionDecision
    price: PriceEstimate = field(default_factory=lambda: PriceEstimate(0.0))
    #: Tool results of the turn too large to send (CTX-13); ``fits`` is then false.
    oversized: tuple[OversizedResult, ...] = ()
    #: PROJ-2: each attached image's status, tokens and, when it is not sent, why.
    images: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The CONTRACT's plan JSON (statuses fully expanded)."""
        t = self.tokens
        return {
            "mode": self.mode,
            "fits": self.fits,
            "messages": [dict(m) for m in self.messages],
            "status": dict(self.status.items()),
            "files": dict(self.files),
            "tokens": {
                "instructions": t.instructions,
                "tools": t.tools,
                "summary": t.summary,
                "messages": t.messages,
                "files": t.files,
                "images": t.images,
                "apps": t.apps,
                "facts": t.facts,
                "reserve": t.reserve,
                "free": t.free,
                "used": t.used,
                "window": t.window,
            },
            "level": self.level,
            "compaction": self.compaction.to_dict(),
            "price": {
                "next_request": self.price.next_request,
                "compaction": self.price.compaction,
                "currency": self.price.currency,
                "free": self.price.free,
            },
            # PROJ-2, only when images are attached: each one's status, tokens and reason.
            **({"images": {k: dict(v) for k, v in self.images.items()}} if self.images else {}),
        }

    def require_fit(self) -> None:
        """Raise ``DoesNotFit`` (CTX-19) unless the request fits the window as planned; when
        a tool result of the turn is what cannot fit, ``ToolResultTooLarge`` names it."""
        if self.oversized:
            first = self.oversized[0]
            raise ToolResultTooLarge(
                first.tool,
                first.tokens,
                first.message_id,
                needed=first.needed,
                available=self.tokens.window,
            )
        if not self.fits:
            raise DoesNotFit(
                needed=self.tokens.used + self.tokens.reserve, available=self.tokens.window
            )
