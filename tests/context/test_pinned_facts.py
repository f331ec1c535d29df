"""CTX-24 in the engine: the pinned facts are one message right after the summary (or where
the summary would be), in every mode, counted from their cached count (never re-tokenized)
as their own "facts" row, and never folded: a fold leaves them as they were."""

from __future__ import annotations

import pytest

from chatmem.context import Message, PinnedFacts, Prices, Profile, Summary, plan
from chatmem.context.compaction import SUMMARY_HEADER
from chatmem.context.document import conversation_from_export
from chatmem.context.errors import PlanInputError
from chatmem.context.pinned_facts import HEADER, render_pinned_facts

from .helpers import conv, pairs

TEXT = render_pinned_facts(["The budget is 4,200 EUR.", "Order ORD-58213 ships to Oslo."])


class CountingTokenizer:
    name = "estimate"

    def __init__(self) -> None:
        self.seen: list[str] = []

    def count(self, text: str) -> int:
        self.seen.append(text)
        return len(text) // 4 + 1


def test_ctx24_render_lists_each_fact_under_a_header_and_keeps_a_fact_whole() -> None:
    text = render_pinned_facts(["one", "two\nlines"])
    assert text == f"{HEADER}\n- one\n- two\n  lines"
    assert render_pinned_facts([]) == ""


def test_ctx24_facts_follow_the_summary_and_are_counted_as_their_own_row() -> None:
    profile = Profile(context_window=8_192, prices=Prices(input_per_mtok=1_000_000.0))
    tok = CountingTokenizer()
    history = pairs(3)
    summary = Summary("Earlier: the user plans a trip.", through=history[1].id, tokens=20)
    without = plan(conv(history, summary=summary), profile, mode="full", draft="hi", tokenizer=tok)
    c = conv(history, summary=summary, pinned_facts=PinnedFacts(TEXT, tokens=123))
    result = plan(c, profile, mode="full", draft="hi", tokenizer=tok)
    assert result.messages[0]["content"].startswith(SUMMARY_HEADER)
    assert result.messages[1] == {"role": "system", "content": TEXT}
    assert TEXT not in tok.seen  # the cached count, never a new count (CTX-2)
    assert result.tokens.facts == 123 and without.tokens.facts == 0
    assert result.tokens.used == without.tokens.used + 123
    assert result.tokens.free == without.tokens.free - 123
    assert result.to_dict()["tokens"]["facts"] == 123
    assert round(result.price.next_request - without.price.next_request, 6) == 123.0


@pytest.mark.parametrize("mode", ["off", "economy", "full", "window"])
def test_ctx24_facts_are_sent_in_every_mode_in_the_instructions_role(mode: str) -> None:
    profile = Profile(instructions_role="developer")
    c = conv(pairs(2), instructions="Be brief.", pinned_facts=PinnedFacts(TEXT, tokens=40))
    result = plan(c, profile, mode=mode, draft="next")  # type: ignore[arg-type]
    assert result.messages[0] == {"role": "developer", "content": "Be brief."}
    assert result.messages[1] == {"role": "developer", "content": TEXT}
    assert result.tokens.facts == 40


def test_ctx24_a_planned_fold_never_takes_the_facts() -> None:
    profile = Profile(context_window=8_192, answer_reserve=1_024, full_keep_messages=2)
    history = pairs(200, size=500)
    c = conv(history, pinned_facts=PinnedFacts(TEXT, tokens=60))
    result = plan(c, profile, mode="full", draft="and now?")
    assert result.compaction.needed  # the history must fold to fit
    assert "summarized" in result.status.values()
    # the request as it goes after the fold: the pending summary, then the facts, whole
    assert result.messages[0]["content"].startswith(SUMMARY_HEADER)
    assert result.messages[1] == {"role": "system", "content": TEXT}
    assert result.tokens.facts == 60
    assert result.tokens.used + result.tokens.reserve + result.tokens.free == 8_192


def test_ctx24_facts_take_room_from_history_never_silently() -> None:
    profile = Profile(context_window=4_096, answer_reserve=1_024)
    history = pairs(40, size=100)
    roomy = plan(conv(history), profile, mode="full")
    crowded = plan(
        conv(history, pinned_facts=PinnedFacts(TEXT, tokens=2_000)), profile, mode="full"
    )
    assert crowded.tokens.used <= 4_096 - 1_024
    in_memory = sum(s == "in_memory" for s in crowded.status.values())
    assert in_memory < sum(s == "in_memory" for s in roomy.status.values())


def test_ctx24_facts_too_large_for_the_window_make_the_plan_not_fit() -> None:
    profile = Profile(context_window=8_192, answer_reserve=1_024)
    c = conv([Message("m0", "user", "hi")], pinned_facts=PinnedFacts(TEXT, tokens=9_000))
    result = plan(c, profile, mode="full", draft="x")
    assert not result.fits and result.level == "red"


def test_ctx24_the_export_file_carries_facts_to_the_offline_plan() -> None:
    item = {
        "id": "c1",
        "messages": [{"id": "m1", "role": "user", "content": "hello"}],
        "facts": [
            {"id": "f1", "text": "The budget is 4,200 EUR.", "message_id": "m1"},
            {"id": "f2", "text": "Order ORD-58213 ships to Oslo.", "created_at": "2026-12-01"},
        ],
    }
    conversation, profile, mode = conversation_from_export(item)
    result = plan(conversation, profile, mode=mode)
    assert {"role": "system", "content": TEXT} in result.messages
    assert result.tokens.facts > 0  # counted here: the offline path has no cached count
    with pytest.raises(PlanInputError, match=r"facts\[0\]\.colour"):
        conversation_from_export({**item, "facts": [{"text": "x", "colour": "red"}]})
    with pytest.raises(PlanInputError, match=r"facts\[0\]\.text"):
        conversation_from_export({**item, "facts": [{"text": "  "}]})
