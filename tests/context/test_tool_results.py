"""CTX-13, CTX-20, PROV-4: tool results too large to send, and binary attachments, in the plan."""

from __future__ import annotations

import pytest

from chatmem.context import (
    DoesNotFit,
    File,
    Message,
    Profile,
    Summary,
    ToolCall,
    ToolResultTooLarge,
    plan,
)
from chatmem.context.folding import fold, run_fold

from .helpers import conv, pairs

SMALL = Profile(context_window=8_192)  # answer reserve 1,024: 7,168 for the request


def _turn(result_tokens: int, *, extra: int | None = None, prefix: str = "t") -> list[Message]:
    """A turn in progress: the question, a call (or two), and the results so far."""
    calls = [ToolCall(f"{prefix}c1", "fetch_orders", "{}")]
    if extra is not None:
        calls.append(ToolCall(f"{prefix}c2", "get_time", "{}"))
    out = [
        Message(f"{prefix}u", "user", "List my orders", tokens=10),
        Message(f"{prefix}a", "assistant", "", tokens=30, tool_calls=tuple(calls)),
        Message(
            f"{prefix}r1",
            "tool",
            "order numbers…",
            tokens=result_tokens,
            tool_call_id=f"{prefix}c1",
        ),
    ]
    if extra is not None:
        out.append(
            Message(f"{prefix}r2", "tool", "12:00", tokens=extra, tool_call_id=f"{prefix}c2")
        )
    return out


@pytest.mark.parametrize("mode", ["full", "economy", "off"])
def test_ctx13_a_tool_result_too_large_for_the_window_is_left_out_and_named(mode: str) -> None:
    history = [*pairs(3), *_turn(20_000)]
    result = plan(conv(history), SMALL, mode=mode, turn_start="tu")  # type: ignore[arg-type]
    assert not result.fits and result.level == "red"
    assert [r.tool for r in result.oversized] == ["fetch_orders"]
    assert result.oversized[0].message_id == "tr1"
    assert result.oversized[0].tokens == 20_000
    # left out with its call (CTX-20): neither is sent, both are out of memory
    assert result.status["tr1"] == "out_of_memory"
    assert result.status["ta"] == "out_of_memory"
    assert result.status["tu"] == "in_memory"
    assert not any(m.get("role") == "tool" for m in result.messages)
    assert not any(m.get("tool_calls") for m in result.messages)
    assert not result.compaction.needed  # nothing is folded for a refused turn
    # the refusal counts what the turn would need (CTX-19, CTX-21: never disagree)
    assert result.tokens.used + result.tokens.reserve > result.tokens.window
    with pytest.raises(ToolResultTooLarge) as caught:
        result.require_fit()
    error = caught.value
    assert isinstance(error, DoesNotFit) and error.code == "does_not_fit"
    assert "fetch_orders" in str(error) and "20,000 tokens" in str(error)
    assert "kept in the conversation" in str(error)
    details = error.details()
    assert details["needed"] > details["available"] == 8_192
    assert details["tool"] == "fetch_orders" and details["message_id"] == "tr1"


def test_ctx13_only_the_result_that_cannot_fit_leaves_with_its_own_call() -> None:
    history = [*pairs(1), *_turn(20_000, extra=40)]
    result = plan(conv(history), SMALL, mode="full", turn_start="tu")
    assert [r.tool for r in result.oversized] == ["fetch_orders"]
    assert result.status["tr1"] == "out_of_memory"
    assert result.status["tr2"] == result.status["ta"] == "in_memory"
    sent_calls = [m["tool_calls"] for m in result.messages if m.get("tool_calls")]
    assert [[c["id"] for c in calls] for calls in sent_calls] == [["tc2"]]
    assert [m["tool_call_id"] for m in result.messages if m.get("role") == "tool"] == ["tc2"]


def test_ctx13_a_result_that_fits_once_the_history_is_folded_is_not_left_out() -> None:
    # 30 pairs of 1,000 tokens: the result fits beside a folded summary
    history = [*pairs(30, size=1_000), *_turn(3_000)]
    result = plan(conv(history), SMALL, mode="full", turn_start="tu")
    assert result.oversized == ()
    assert result.fits and result.compaction.needed
    assert result.status["tr1"] == "in_memory"


def test_ctx13_a_result_is_left_out_only_when_even_the_fold_cannot_make_room() -> None:
    history = [*pairs(30, size=1_000), *_turn(6_900)]  # fits an empty memory, not a summary
    result = plan(conv(history), SMALL, mode="full", turn_start="tu")
    assert [r.tool for r in result.oversized] == ["fetch_orders"]
    no_history = plan(conv(_turn(6_900)), SMALL, mode="full", turn_start="tu")
    assert no_history.fits and no_history.oversized == ()


def test_ctx19_a_question_too_large_is_still_refused_as_the_message() -> None:
    history = [*pairs(1), Message("big", "user", "x", tokens=20_000)]
    result = plan(conv(history), SMALL, mode="full", turn_start="big")
    assert result.oversized == ()
    with pytest.raises(DoesNotFit) as caught:
        result.require_fit()
    assert not isinstance(caught.value, ToolResultTooLarge)


def test_ctx13_the_next_turn_treats_the_pair_as_history_and_is_not_blocked() -> None:
    failed = _turn(20_000)  # the turn that was refused: question, call, huge result
    history = [*pairs(2), *failed, Message("n", "user", "Something else", tokens=10)]
    for mode in ("full", "economy"):
        result = plan(conv(history), SMALL, mode=mode, turn_start="n")  # type: ignore[arg-type]
        assert result.oversized == ()
        assert result.fits and result.compaction.needed  # folded, not sent verbatim
        assert result.status["tr1"] == "summarized"
        assert not any(m.get("role") == "tool" for m in result.messages)
    off = plan(conv(history), SMALL, mode="off", turn_start="n")
    assert off.fits and off.status["tr1"] == "out_of_memory"
    # excluded by the user (CTX-15): no fold needed at all
    excluded = [
        *pairs(2),
        *(
            Message(m.id, m.role, m.content, m.tokens, True, m.tool_calls, m.tool_call_id)
            for m in failed
        ),
        Message("n", "user", "Something else", tokens=10),
    ]
    result = plan(conv(excluded), SMALL, mode="full", turn_start="n")
    assert result.fits and not result.compaction.needed
    assert result.status["tr1"] == "excluded"


def test_ctx21_the_fold_of_a_huge_result_runs_in_pieces_and_the_turn_fits() -> None:
    failed = _turn(20_000)
    huge = Message("tr1", "tool", "order 12345 shipped; " * 4_000, tool_call_id="tc1")
    history = [*pairs(2), *failed[:2], huge, Message("n", "user", "Something else", tokens=10)]
    c = conv(history)
    result = run_fold(fold(c, SMALL, mode="full", turn_start="n"), lambda r: "summary")
    assert result.plan.fits and not result.plan.compaction.needed
    assert result.rounds >= 3  # 20,000 tokens through an 8K summariser


def test_prov4_binary_attachments_are_never_sent_and_cost_nothing() -> None:
    history = [
        Message("u", "user", "Show me the picture", tokens=10),
        Message("a", "assistant", "", tokens=20, tool_calls=(ToolCall("c", "get_image", "{}"),)),
        Message(
            "r",
            "tool",
            "[image/png, 5.4 KB, attached as file get_image.png]",
            tokens=20,
            tool_call_id="c",
        ),
        Message("f", "assistant", "Here it is.", tokens=10),
    ]
    files = [
        File("img", "get_image.png", "", message_id="r", mime="image/png", tokens=0),
        File("pin", "pinned.png", "", state="pinned", mime="image/png", tokens=0),
        File("off", "gone.png", "", state="excluded", mime="image/png", tokens=0),
        File("txt", "notes.txt", "some notes", message_id="r"),
    ]
    result = plan(conv(history, files=files), Profile(), mode="full", draft="and?")
    assert result.files == {
        "img": "out_of_memory",
        "pin": "out_of_memory",
        "off": "excluded",
        "txt": "in_memory",
    }
    assert result.tokens.files > 0  # the text file only
    text_only = plan(conv(history, files=files[3:]), Profile(), mode="full", draft="and?")
    assert result.tokens.files == text_only.tokens.files
    assert not any(str(m["content"]).startswith("File get_image.png") for m in result.messages)
    assert any(str(m["content"]).startswith("File notes.txt") for m in result.messages)
    assert result.status["r"] == "in_memory"  # the placeholder is sent


def test_the_summary_floor_counts_a_summary_already_made() -> None:
    history = [*pairs(2), *_turn(6_000)]
    summarized = conv(history, summary=Summary("short summary", through="m3", tokens=50))
    result = plan(summarized, SMALL, mode="full", turn_start="tu")
    assert result.fits and result.oversized == ()
