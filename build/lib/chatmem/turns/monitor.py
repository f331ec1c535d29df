"""What a turn tells the operators: one log line when it starts, one when it ends (run id,
profile, tokens, cost, time to first token, outcome), a warning for each failed MCP call and
for a provider's failure, and the turn metrics (:class:`chatmem.telemetry.metrics.Metrics`).

A :class:`TurnMonitor` follows one run: the run's journal hands it every event it publishes
(:class:`chatmem.turns.journal.EventJournal`), so what is counted is exactly what watchers saw.
No message text, tool argument or result is ever logged — only ids, names and numbers.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from chatmem.telemetry.metrics import Metrics
from chatmem.turns import events
from chatmem.turns.events import RunEvent

log = logging.getLogger("chatmem.turns")


class TurnMonitor:
    def __init__(
        self,
        metrics: Metrics,
        run_id: str,
        conversation_id: str,
        profile: str | None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._metrics = metrics
        self._run_id = run_id
        self._conversation_id = conversation_id
        self._profile = profile or "unknown"
        self._clock = clock
        self._began = clock()
        self._first_token: float | None = None
        self._servers: dict[str, str] = {}  # tool call id → MCP server, while it runs
        self._ended = False

    def started(self) -> None:
        self._metrics.turns_running.inc()
        log.info(
            "turn started",
            extra={
                "run_id": self._run_id,
                "conversation_id": self._conversation_id,
                "profile": self._profile,
            },
        )

    def seen(self, event: RunEvent) -> None:
        """One published event of the run."""
        if isinstance(event, events.Delta):
            if self._first_token is None and event.text:
                self._first_token = self._clock() - self._began
                self._metrics.first_token_seconds.observe(self._first_token)
        elif isinstance(event, events.ToolCall):
            if event.server and not event.client:
                self._servers[event.id] = event.server
        elif isinstance(event, events.ToolResult):
            self._tool_result(event)
        elif isinstance(event, events.Compaction):
            if event.final:
                self._metrics.compactions.inc()
        elif isinstance(event, events.Done):
            self._done(event)
        elif isinstance(event, events.Error):
            self._failed(event)

    def _tool_result(self, event: events.ToolResult) -> None:
        server = self._servers.pop(event.id, None)
        if server is None:
            return
        self._metrics.mcp_calls.labels(server, event.status).inc()
        if event.status != "completed":
            log.warning(
                "MCP tool call %s",
                event.status,
                extra={"run_id": self._run_id, "server": server, "tool": event.name},
            )

    def _done(self, event: events.Done) -> None:
        profile = str((event.answered_by or {}).get("name") or self._profile)
        prompt = int(event.usage.get("prompt_tokens", 0))
        completion = int(event.usage.get("completion_tokens", 0))
        self._metrics.tokens.labels(profile, "prompt").inc(prompt)
        self._metrics.tokens.labels(profile, "completion").inc(completion)
        self._metrics.cost.labels(profile).inc(max(event.cost, 0.0))
        self._end(
            event.status,
            profile=profile,
            prompt_tokens=prompt,
            completion_tokens=completion,
            cost_usd=round(event.cost, 6),
        )

    def _failed(self, event: events.Error) -> None:
        log.warning(
            "turn failed: %s",
            event.message,
            extra={"run_id": self._run_id, "profile": self._profile, "code": event.code},
        )
        self._end(event.code, profile=self._profile)

    def _end(self, outcome: str, **fields: object) -> None:
        if self._ended:
            return
        self._ended = True
        self._metrics.turns.labels(outcome).inc()
        self._metrics.turns_running.dec()
        ttft = self._first_token
        log.info(
            "turn ended",
            extra={
                "run_id": self._run_id,
                "outcome": outcome,
                **fields,
                "ttft_ms": round(ttft * 1000) if ttft is not None else None,
                "duration_ms": round((self._clock() - self._began) * 1000),
            },
        )

    def closed(self) -> None:
        """The run's task ended; a run that ended without a terminal event here (cancelled at
        shutdown: recovery writes its end) is counted ``interrupted``."""
        if not self._ended:
            self._end("interrupted", profile=self._profile)
