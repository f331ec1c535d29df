"""The server's Prometheus metrics, owned by one :class:`Metrics` object per app (its own
registry: two apps in one process — tests — never mix their counts).

``GET /metrics`` renders :meth:`Metrics.render`.  The names follow Prometheus' conventions
(``_total`` counters, ``_seconds`` durations, base units); labels are bounded: a route is its
template (``/api/v1/conversations/{conversation_id}``), never the path a client sent.
"""

from __future__ import annotations

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)

#: Seconds: from a fast API call to a long turn.
_DURATIONS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)
_WAITS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5)

CONTENT_TYPE = CONTENT_TYPE_LATEST


class Metrics:
    """Every metric chatmem exports; the rooms report through its methods' objects."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.requests = Counter(
            "chatmem_http_requests_total",
            "HTTP requests answered, by route template, method and status.",
            ("route", "method", "status"),
            registry=r,
        )
        self.request_seconds = Histogram(
            "chatmem_http_request_duration_seconds",
            "Time to the end of the answer (a stream: until it closes), by route and method.",
            ("route", "method"),
            buckets=_DURATIONS,
            registry=r,
        )
        self.turns = Counter(
            "chatmem_turns_total",
            "Turns ended, by outcome (completed, stopped, interrupted, failed, or the error code).",
            ("outcome",),
            registry=r,
        )
        self.turns_running = Gauge(
            "chatmem_turns_running", "Turns running in this process.", registry=r
        )
        self.first_token_seconds = Histogram(
            "chatmem_turn_first_token_seconds",
            "From a turn's start to its first streamed text.",
            buckets=_DURATIONS,
            registry=r,
        )
        self.tokens = Counter(
            "chatmem_tokens_total",
            "Tokens the providers billed, by profile and kind (prompt, completion).",
            ("profile", "kind"),
            registry=r,
        )
        self.cost = Counter(
            "chatmem_cost_usd_total",
            "What the turns cost, in USD, by profile.",
            ("profile",),
            registry=r,
        )
        self.compactions = Counter(
            "chatmem_compactions_total", "Summaries made (each round counts).", registry=r
        )
        self.mcp_calls = Counter(
            "chatmem_mcp_calls_total",
            "Tool calls to MCP servers, by server and outcome (the tool result's status).",
            ("server", "outcome"),
            registry=r,
        )
        self.sse_watchers = Gauge(
            "chatmem_sse_watchers", "Clients following a run's events right now.", registry=r
        )
        self.write_wait_seconds = Histogram(
            "chatmem_db_write_wait_seconds",
            "How long a unit of work waited for its turn to write (SQLite's one write lock).",
            buckets=_WAITS,
            registry=r,
        )

    def render(self) -> bytes:
        """The text exposition format (``CONTENT_TYPE``)."""
        return generate_latest(self.registry)
