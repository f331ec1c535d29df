"""The turn monitor: what each kind of run event counts (issue 31 §2), on a fake clock."""

from __future__ import annotations

import logging

import pytest

from chatmem.telemetry.metrics import Metrics
from chatmem.turns import events
from chatmem.turns.monitor import TurnMonitor


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def value(metrics: Metrics, name: str, **labels: str) -> float:
    found = metrics.registry.get_sample_value(name, labels)
    return found or 0.0


def test_tools_compactions_and_the_first_token(caplog: pytest.LogCaptureFixture) -> None:
    metrics, clock = Metrics(), Clock()
    monitor = TurnMonitor(metrics, "r1", "c1", "fast", clock=clock)
    monitor.started()
    assert value(metrics, "chatmem_turns_running") == 1
    monitor.seen(events.Compaction(1, "Summarising", 1, 1, 1, 1, final=True))
    clock.now += 0.25
    monitor.seen(events.Delta(2, "Hel", 0))
    clock.now += 1
    monitor.seen(events.Delta(3, "lo", 0))
    for seq, (call, status) in enumerate((("a", "completed"), ("b", "failed")), start=4):
        monitor.seen(events.ToolCall(seq, call, "search", "{}", None, "docs"))
        monitor.seen(events.ToolResult(seq, call, "search", "secret text", status, None))
    # A client's own tool (handed back) is not an MCP call.
    monitor.seen(events.ToolCall(9, "c", "mine", "{}", None, None, client=True))
    caplog.set_level(logging.INFO)
    monitor.seen(
        events.Done(10, "completed", "m1", None, {"prompt_tokens": 9, "completion_tokens": 3},
                    0.5, None, "stop")
    )  # fmt: skip
    monitor.closed()
    assert value(metrics, "chatmem_compactions_total") == 1
    assert value(metrics, "chatmem_turn_first_token_seconds_sum") == pytest.approx(0.25)
    assert value(metrics, "chatmem_mcp_calls_total", server="docs", outcome="completed") == 1
    assert value(metrics, "chatmem_mcp_calls_total", server="docs", outcome="failed") == 1
    assert value(metrics, "chatmem_turns_total", outcome="completed") == 1
    assert value(metrics, "chatmem_tokens_total", profile="fast", kind="prompt") == 9
    assert value(metrics, "chatmem_cost_usd_total", profile="fast") == 0.5
    assert value(metrics, "chatmem_turns_running") == 0
    (ended,) = [r for r in caplog.records if r.getMessage() == "turn ended"]
    assert vars(ended)["ttft_ms"] == 250 and vars(ended)["duration_ms"] == 1250
    assert all("secret text" not in str(vars(r)) for r in caplog.records)


def test_a_failed_turn_and_one_cut_short() -> None:
    metrics = Metrics()
    failed = TurnMonitor(metrics, "r1", "c1", "p")
    failed.started()
    failed.seen(events.Error(1, "provider_error", "The model API broke off."))
    failed.closed()
    cut = TurnMonitor(metrics, "r2", "c1", "p")
    cut.started()
    cut.closed()  # cancelled at shutdown: recovery writes its end
    assert value(metrics, "chatmem_turns_total", outcome="provider_error") == 1
    assert value(metrics, "chatmem_turns_total", outcome="interrupted") == 1
    assert value(metrics, "chatmem_turns_running") == 0
