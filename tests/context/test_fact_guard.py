"""The fact guard (CTX-24): what a summary lacks is appended verbatim, dated, oldest first,
within the summary's cap; what the cap leaves out is counted and listed; facts carry over
from round to round through the real fold."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from chatmem.context import folding
from chatmem.context.compaction import SummaryRound, new_summary_tokens, summary_cap
from chatmem.context.fact_guard import (
    DROPPED_LINE,
    KEPT_HEADING,
    FactMemo,
    facts_of,
    guard,
    strip_kept,
)
from chatmem.context.tokens import MESSAGE_OVERHEAD, get_tokenizer
from chatmem.context.values import Conversation, Fact, Message, Profile

TOK = get_tokenizer("estimate")
DAY = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
FORGETFUL = "We talked about the kitchen."


def _msg(i: int, role: str, text: str) -> Message:
    return Message(f"m{i}", role, text, at=DAY + timedelta(days=i))  # type: ignore[arg-type]


def _kept_lines(text: str) -> list[str]:
    section = text.split(KEPT_HEADING, 1)[1]
    return [line for line in section.strip().splitlines() if line.startswith("- ")]


def test_missing_facts_are_appended_with_their_dates_oldest_first() -> None:
    messages = [
        _msg(0, "user", "The budget is 4,200 EUR and the order is ORD-58213."),
        _msg(1, "assistant", "Noted: delivery to /srv/kitchen/plan.pdf."),
        _msg(2, "user", "Update: the budget is now 5,000 EUR."),
    ]
    result = guard(FORGETFUL, facts_of(messages), 1000, TOK)
    assert result.text.startswith(FORGETFUL + "\n\n" + KEPT_HEADING)
    assert _kept_lines(result.text) == [
        "- 4,200 EUR (2026-03-01)",
        "- ORD-58213 (2026-03-01)",
        "- /srv/kitchen/plan.pdf (2026-03-02)",
        "- 5,000 EUR (2026-03-03)",  # the revision stands after the value it replaced
    ]
    assert [f.message_id for f in result.kept] == ["m0", "m0", "m1", "m2"]
    assert result.dropped == () and result.dropped_count == 0


def test_facts_the_summary_holds_are_not_repeated_after_normalising() -> None:
    messages = [_msg(0, "user", "Pay 4,200 EUR for order ORD-58213, digest 3F2A9C1E7B.")]
    summary = "Goal: pay 4200  eur for ord-58213 (digest 3f2a9c1e7b)."
    result = guard(summary, facts_of(messages), 1000, TOK)
    assert result.text == summary
    assert result.kept == () and {f.text for f in result.held} == {
        "4,200 EUR",
        "ORD-58213",
        "3F2A9C1E7B",
    }


def test_guarding_twice_gives_the_same_summary() -> None:
    facts = facts_of([_msg(0, "user", "Order ORD-58213, 4,200 EUR, `make deploy`.")])
    once = guard(FORGETFUL, facts, 1000, TOK)
    assert guard(once.text, facts, 1000, TOK) == once
    # A section the summariser copied is taken out and written again.
    assert strip_kept(once.text) == FORGETFUL


def test_excluded_messages_give_no_facts_CTX_15() -> None:
    message = Message("m0", "user", "Order ORD-58213.", excluded=True)
    assert facts_of([message]) == []


def test_tool_results_and_call_arguments_count_as_messages() -> None:
    facts = facts_of([Message("t0", "tool", '{"invoice": "INV2024-77"}', tool_call_id="c")])
    assert [f.text for f in facts] == ["INV2024-77"]


def _many(prefix: str, role: str, n: int, start: int) -> list[Message]:
    return [_msg(start + k, role, f"Reference {prefix}-{1000 + k}.") for k in range(n)]


def test_the_cap_keeps_the_users_facts_then_the_repeated_then_the_newest() -> None:
    assistant = _many("ASST", "assistant", 30, 0)
    user = _many("USER", "user", 30, 30)
    repeated = [_msg(60, "assistant", "Again ASST-1000."), _msg(61, "assistant", "ASST-1000.")]
    cap = 1000
    result = guard(FORGETFUL, facts_of([*assistant, *user, *repeated]), cap, TOK)
    kept = [f.text for f in result.kept]
    assert TOK.count(result.text) <= cap
    assert result.dropped_count == len(result.dropped) > 0
    assert len(kept) + result.dropped_count == 60
    # Every user fact is kept before any assistant fact is considered.
    assert all(f"USER-{1000 + k}" in kept for k in range(30))
    # Then the one stated three times, then the newest.
    assert "ASST-1000" in kept
    others = [t for t in kept if t.startswith("ASST-") and t != "ASST-1000"]
    assert others == [f"ASST-{1000 + k}" for k in range(30 - len(others), 30)]
    # Kept in date order; the dropped ones named in one line, listed with their ids.
    assert [f.at for f in result.kept] == sorted(f.at for f in result.kept)  # type: ignore[type-var]
    assert DROPPED_LINE.format(n=result.dropped_count) in result.text
    assert {f.message_id for f in result.dropped} <= {m.id for m in assistant}


def test_a_summary_longer_than_its_cap_gets_no_section_and_drops_everything() -> None:
    facts = facts_of([_msg(0, "user", "Order ORD-58213.")])
    long = "word " * 400
    result = guard(long, facts, 100, TOK)
    assert result.kept == () and result.dropped_count == 1
    assert [f.text for f in result.dropped] == ["ORD-58213"]


def _fold(conv: Conversation, profile: Profile, answer: str) -> Conversation:
    def summarise(round_: SummaryRound) -> str:
        return answer

    flow = folding.fold(conv, profile, mode="economy", tokenizer=TOK, manual=True)
    result = folding.run_fold(flow, summarise)
    assert result.summary is not None
    return Conversation(messages=conv.messages, summary=result.summary)


def _pairs(n: int, start: int, facts: dict[int, str]) -> list[Message]:
    out = []
    for k in range(start, start + n):
        out.append(_msg(2 * k, "user", f"Question {k} about the kitchen. {facts.get(k, '')}"))
        out.append(_msg(2 * k + 1, "assistant", f"Answer {k} about the kitchen."))
    return out


def test_facts_carry_over_through_later_rounds_of_the_real_fold() -> None:
    profile = Profile(context_window=8192)
    first = _pairs(6, 0, {1: "The budget is 4,200 EUR.", 3: "Order ORD-58213."})
    conv = _fold(Conversation(messages=tuple(first)), profile, FORGETFUL)
    assert [f.text for f in conv.summary.kept] == ["4,200 EUR", "ORD-58213"]  # type: ignore[union-attr]
    later = _pairs(6, 6, {8: "The budget is now 5,000 EUR."})
    conv = Conversation(messages=(*first, *later), summary=conv.summary)
    conv = _fold(conv, profile, "Another forgetful sentence.")
    summary = conv.summary
    assert summary is not None
    assert [f.text for f in summary.kept] == ["4,200 EUR", "ORD-58213", "5,000 EUR"]
    assert summary.text.index("4,200 EUR") < summary.text.index("5,000 EUR")
    # The plan's worst case stays true: the summary as sent fits new_summary_tokens.
    assert TOK.count(summary.text) <= summary_cap(profile)
    assert summary.tokens is not None and summary.tokens <= new_summary_tokens(profile)
    assert summary.tokens >= MESSAGE_OVERHEAD


def test_the_stored_round_and_the_folds_summary_are_the_same_text() -> None:
    profile = Profile(context_window=8192)
    conv = Conversation(messages=tuple(_pairs(6, 0, {1: "Ticket INV2024-77."})))
    seen: list[str] = []

    def summarise(round_: SummaryRound) -> str:
        assert round_.guard is not None
        seen.append(round_.guard.apply(FORGETFUL).text)  # what the turn driver stores
        return FORGETFUL

    flow = folding.fold(conv, profile, mode="economy", tokenizer=TOK, manual=True)
    result = folding.run_fold(flow, summarise)
    assert result.summary is not None and seen == [result.summary.text]


def test_a_fact_stated_by_the_user_and_the_assistant_counts_as_the_users() -> None:
    facts = [
        Fact("ORD-1234", "identifier", "m0", "assistant"),
        Fact("ORD-1234", "identifier", "m1", "user"),
    ]
    result = guard(FORGETFUL, facts, 1000, TOK)
    assert [(f.role, f.repeats, f.message_id) for f in result.kept] == [("user", 2, "m1")]


def test_a_memo_kept_across_rounds_changes_nothing_but_what_is_worked_out_again() -> None:
    messages = [
        _msg(0, "user", "The budget is 4,200 EUR and the order is ORD-58213."),
        _msg(1, "assistant", "Noted: delivery to /srv/kitchen/plan.pdf on 2026-04-01."),
    ]
    facts = facts_of(messages)
    memo = FactMemo()
    first = guard(FORGETFUL, facts, 60, TOK, memo=memo)
    assert first == guard(FORGETFUL, facts, 60, TOK)  # the same summary without a memo
    lines = memo.line.cache_info()
    # The next round carries the same facts: their lines and counts are not worked out again.
    again = guard(first.text, facts, 60, TOK, memo=memo)
    assert again == first
    assert memo.line.cache_info().misses == lines.misses
    assert memo.line.cache_info().hits > lines.hits
