"""The engine's rules, one or more tests per SPEC id (CTX-2..CTX-20, TURN-5)."""

from __future__ import annotations

import re

import pytest

from chatmem.context import (
    SUMMARY_SECTIONS,
    Conversation,
    DoesNotFit,
    File,
    Message,
    PlanInputError,
    Prices,
    Profile,
    Summary,
    compaction_request,
    effective_mode,
    full_threshold,
    get_tokenizer,
    plan,
    price_for,
    summary_message,
)
from chatmem.context.compaction import new_summary_tokens
from chatmem.context.folding import fold, run_fold
from chatmem.context.plan_result import level_for

from .helpers import conv, pairs, tool_pair


class CountingTokenizer:
    """A fake tokenizer that records every text it is asked to count."""

    name = "estimate"

    def __init__(self) -> None:
        self.seen: list[str] = []

    def count(self, text: str) -> int:
        self.seen.append(text)
        return len(text) // 4 + 1


def cached(messages: list[Message], tokens: int = 10) -> list[Message]:
    return [
        Message(m.id, m.role, m.content, tokens, m.excluded, m.tool_calls, m.tool_call_id)
        for m in messages
    ]


def test_ctx2_planning_never_retokenizes_cached_history() -> None:
    tok = CountingTokenizer()
    c = conv(cached(pairs(50)))
    result = plan(c, Profile(), mode="full", draft="new question", tokenizer=tok)
    assert tok.seen == ["new question"]
    assert result.tokens.messages == 100 * 10 + 4 + tok.count("new question")


def test_ctx3_off_sends_only_instructions_pinned_files_and_the_question() -> None:
    files = (
        File("f1", "a.txt", "pinned text", message_id="m0", state="pinned"),
        File("f2", "b.txt", "auto text", message_id="m0"),
    )
    c = conv(pairs(3), instructions="Be brief.", files=files)
    result = plan(c, Profile(), mode="off", draft="hello")
    assert [m["role"] for m in result.messages] == ["system", "system", "user"]
    assert result.messages[0]["content"] == "Be brief."
    assert "pinned text" in result.messages[1]["content"]
    assert result.messages[-1] == {"role": "user", "content": "hello"}
    assert set(result.status.values()) == {"out_of_memory"}
    assert result.files == {"f1": "pinned", "f2": "out_of_memory"}


def test_ctx4_economy_keeps_pairs_verbatim_until_a_batch_is_full() -> None:
    profile = Profile(economy_pairs=3, economy_batch=4)
    result = plan(conv(pairs(6)), profile, mode="economy")
    assert not result.compaction.needed  # 6 - 3 = 3 pairs wait for a batch of 4
    assert len(result.messages) == 12
    # one more complete pair: 7 - 3 = 4 pending, fold the oldest batch of 4
    result = plan(conv(pairs(7)), profile, mode="economy")
    assert result.compaction.needed
    request = result.compaction.request
    assert request is not None
    assert (request.first_id, request.through, request.message_count) == ("m0", "m7", 8)


def test_ctx4_economy_sends_the_summary_and_the_pairs_after_it() -> None:
    history = pairs(6)
    c = conv(history, summary=Summary("the story so far", through="m3"))
    result = plan(c, Profile(), mode="economy")
    assert result.messages[0] == summary_message(Summary("the story so far", "m3"))
    assert [m["content"] for m in result.messages[1:]] == [m.content for m in history[4:]]
    assert [result.status[f"m{i}"] for i in range(12)] == ["summarized"] * 4 + ["in_memory"] * 8
    assert result.tokens.summary > 0


def test_ctx5_full_threshold_is_the_smaller_of_80_percent_and_200k() -> None:
    assert full_threshold(Profile(context_window=32_768)) == 26_214
    assert full_threshold(Profile(context_window=1_000_000)) == 200_000


def test_ctx5_full_sends_everything_under_the_threshold() -> None:
    result = plan(conv(cached(pairs(30))), Profile(), mode="full")
    assert not result.compaction.needed
    assert len(result.messages) == 60
    assert result.compaction.threshold == 26_214


def test_ctx5_full_compacts_over_the_threshold_keeping_the_last_20_messages() -> None:
    profile = Profile(context_window=10_000, answer_reserve=1_000)  # threshold 8,000
    history = cached(pairs(40), tokens=100)  # 8,000 tokens of history
    result = plan(conv(history), profile, mode="full")
    assert result.fits
    assert result.compaction.needed
    request = result.compaction.request
    assert request is not None
    assert request.through == "m59"  # m60..m79: the last 20 messages stay verbatim
    assert result.price.compaction == 0.0 and result.price.free


def test_ctx5_full_does_not_compact_when_it_would_not_noticeably_unload() -> None:
    profile = Profile(context_window=10_000, answer_reserve=1_000)
    small = cached(pairs(5), tokens=10)
    huge = cached(pairs(10, start=10), tokens=400)  # the last 20 messages hold the weight
    result = plan(conv(small + huge), profile, mode="full")
    assert result.tokens.used + 1_000 > 8_000
    assert result.fits
    assert not result.compaction.needed


def test_ctx5_full_compacts_when_it_would_not_fit_otherwise() -> None:
    profile = Profile(context_window=10_000, answer_reserve=1_000)
    result = plan(conv(cached(pairs(100), tokens=100)), profile, mode="full")
    assert result.fits  # CTX-21: after the fold it fits, so it is admitted
    assert result.compaction.needed
    assert result.compaction.request is not None
    assert result.compaction.request.first_id == "m0"
    assert result.tokens.used <= 9_000  # the request as sent after the fold
    assert result.status["m0"] == "summarized"  # already marked as it will be
    assert result.status["m199"] == "in_memory"


def test_ctx5_full_never_folds_the_last_complete_pair() -> None:
    profile = Profile(context_window=15_000, answer_reserve=1_000, full_keep_messages=0)
    result = plan(conv(cached(pairs(40), tokens=150)), profile, mode="full")
    request = result.compaction.request
    assert request is not None
    assert request.through == "m77"


def test_ctx6_window_keeps_the_last_n_messages_counting_the_current_one() -> None:
    result = plan(conv(pairs(20)), Profile(), mode="window", draft="now")
    assert len(result.messages) == 12
    assert result.messages[-1] == {"role": "user", "content": "now"}
    statuses = list(result.status.values())
    assert statuses[-11:] == ["in_memory"] * 11
    assert set(statuses[:-11]) == {"out_of_memory"}


def test_ctx6_window_counts_characters_newest_to_oldest_and_stops() -> None:
    history = [
        Message("a", "user", "x" * 50),
        Message("b", "assistant", "y" * 30),
        Message("c", "user", "z" * 40),
    ]
    profile = Profile(window_chars=80)
    result = plan(conv(history), profile, mode="window")
    # c (40) + b (30) = 70; a (50) merely does not fit: assembly ends, a is not cut
    assert [m["content"] for m in result.messages] == ["y" * 30, "z" * 40]
    assert result.status["a"] == "out_of_memory"


def test_ctx6_window_truncates_an_oversize_message_with_the_exact_marker() -> None:
    history = [Message("a", "user", "short"), Message("b", "assistant", "w" * 10_000)]
    result = plan(conv(history), Profile(), mode="window")
    assert len(result.messages) == 1  # the assembly stops at the cut message
    content = result.messages[0]["content"]
    assert len(content) == 8_000
    dropped = int(re.search(r"\[… (\d+) characters omitted …\]$", content).group(1))
    assert content.startswith("w" * (10_000 - dropped))
    assert 10_000 - dropped == content.index("[…")
    assert result.status == {"a": "out_of_memory", "b": "in_memory"}


def test_ctx6_window_cuts_the_oversize_message_not_its_neighbours() -> None:
    history = [Message("a", "user", "q" * 100), Message("b", "assistant", "w" * 9_000)]
    result = plan(conv(history), Profile(), mode="window", draft="d" * 100)
    contents = [m["content"] for m in result.messages]
    assert contents[-1] == "d" * 100
    assert len(contents) == 2 and len(contents[0]) == 7_900
    assert "characters omitted" in contents[0]


def test_ctx6_window_sends_roles_other_than_assistant_as_user() -> None:
    history = [
        Message("s", "system", "system note"),
        *tool_pair(1),
    ]
    result = plan(conv(history), Profile(), mode="window")
    roles = [m["role"] for m in result.messages]
    assert set(roles) <= {"user", "assistant"}
    assert roles == ["user", "user", "assistant", "user", "assistant"]
    assert "[tool call lookup(" in result.messages[2]["content"]
    assert all("tool_calls" not in m for m in result.messages)


def test_ctx7_stateless_models_always_get_off() -> None:
    profile = Profile(stateless=True)
    assert effective_mode(profile, "full") == "off"
    result = plan(conv(pairs(3)), profile, mode="economy", draft="q")
    assert result.mode == "off"
    assert result.to_dict()["mode"] == "off"
    with pytest.raises(PlanInputError):
        effective_mode(Profile(), "everything")  # type: ignore[arg-type]


def test_ctx9_summary_covers_a_prefix_and_is_sent_as_a_system_message() -> None:
    c = conv(pairs(4), summary=Summary("S", through="m3"))
    result = plan(c, Profile(), mode="full")
    assert result.messages[0]["role"] == "system" and result.messages[0]["content"].endswith("S")
    assert [result.status[f"m{i}"] for i in range(4)] == ["summarized"] * 4
    window = plan(c, Profile(window_messages=2), mode="window")
    assert window.status["m0"] == "out_of_memory"  # the window mode sends no summary


def test_ctx9_a_summary_of_an_unknown_message_is_refused() -> None:
    c = conv(pairs(2), summary=Summary("S", through="nope"))
    with pytest.raises(PlanInputError, match="nope"):
        plan(c, Profile(), mode="full")


def test_ctx9_compaction_prompt_is_structured_with_previous_summary_and_focus() -> None:
    c = conv(pairs(6), summary=Summary("earlier facts", through="m1"))
    request = compaction_request(c, Profile(), mode="full", manual=True, focus="the budget")
    assert request is not None
    first = next(fold(c, Profile(), mode="full", manual=True, focus="the budget"))
    assert (first.first_id, first.through, first.commit) == (
        request.first_id,
        request.through,
        True,
    )
    system, user = first.prompt
    for section in SUMMARY_SECTIONS:
        assert section in system["content"]
    assert "earlier facts" in user["content"]
    assert "the budget" in user["content"]
    assert "question 1" in user["content"] and "question 0" not in user["content"]
    assert request.input_tokens > 0 and request.max_output_tokens > 0


def test_ctx10_automatic_request_matches_the_plan() -> None:
    c = conv(pairs(7))
    request = compaction_request(c, Profile(), mode="economy")
    assert request is not None and request.through == "m7"
    assert compaction_request(conv(pairs(2)), Profile(), mode="economy") is None
    assert compaction_request(conv(pairs(8)), Profile(), mode="window") is None


def test_ctx11_manual_compaction_needs_two_pairs_after_the_summary() -> None:
    assert compaction_request(conv(pairs(1)), Profile(), mode="full", manual=True) is None
    c = conv(pairs(3), summary=Summary("S", through="m1"))
    assert compaction_request(c, Profile(), mode="full", manual=True) is not None
    c = conv(pairs(3), summary=Summary("S", through="m3"))
    assert compaction_request(c, Profile(), mode="full", manual=True) is None


def test_ctx11_manual_compaction_keeps_the_last_pair_verbatim() -> None:
    request = compaction_request(conv(pairs(5)), Profile(), mode="full", manual=True)
    assert request is not None
    assert (request.first_id, request.through, request.message_count) == ("m0", "m7", 8)


def test_ctx11_manual_compaction_is_priced_with_the_summariser_prices() -> None:
    profile = Profile(summarizer_prices=Prices(input_per_mtok=1.0, output_per_mtok=2.0))
    request = compaction_request(conv(pairs(5)), profile, mode="full", manual=True)
    assert request is not None
    expected = request.input_tokens / 1e6 + request.max_output_tokens * 2 / 1e6
    assert request.estimated_cost == pytest.approx(expected)


def test_turn5_ctx13_the_turn_in_progress_is_always_sent() -> None:
    history = pairs(3) + tool_pair(9)[:-1]  # the turn: question, tool call, result
    result = plan(conv(history), Profile(), mode="off", turn_start="t9u")
    assert [m["role"] for m in result.messages] == ["user", "assistant", "tool"]
    assert result.messages[1]["tool_calls"][0]["id"] == "call9"
    assert result.status["t9r"] == "in_memory" and result.status["m0"] == "out_of_memory"
    window = plan(conv(history), Profile(), mode="window", turn_start="t9u")
    assert window.status["t9r"] == "in_memory"


def test_turn5_a_turn_too_large_for_the_window_does_not_fit() -> None:
    history = [*pairs(1), Message("big", "user", "x", tokens=50_000)]
    result = plan(conv(history), Profile(), mode="full", turn_start="big")
    assert not result.fits
    assert not result.compaction.needed  # no fold can make room: nothing to pay for
    assert result.level == "red"
    with pytest.raises(DoesNotFit) as caught:
        result.require_fit()
    # the turn, the answer reserve and the bounded summary the earlier pair would need
    needed = 50_000 + 4_096 + new_summary_tokens(Profile())
    assert caught.value.details() == {"needed": needed, "available": 32_768}


def test_turn_start_must_exist() -> None:
    with pytest.raises(PlanInputError):
        plan(conv(pairs(1)), Profile(), mode="full", turn_start="missing")


def test_ctx14_every_stored_message_has_exactly_one_status() -> None:
    c = conv(pairs(30), summary=Summary("S", through="m9"))
    for mode in ("off", "economy", "full", "window"):
        result = plan(c, Profile(), mode=mode)  # type: ignore[arg-type]
        assert len(result.status) == 60
        assert list(result.status) == [f"m{i}" for i in range(60)]
        assert set(result.status.values()) <= {
            "in_memory",
            "summarized",
            "excluded",
            "out_of_memory",
        }
        assert "m5" in result.status


def test_ctx15_an_excluded_pair_is_not_sent_in_any_mode() -> None:
    history = pairs(4)
    history[2] = Message("m2", "user", history[2].content, excluded=True)
    c = conv(history, summary=None)
    for mode in ("economy", "full", "window"):
        result = plan(c, Profile(), mode=mode)  # type: ignore[arg-type]
        assert result.status["m2"] == "excluded" and result.status["m3"] == "excluded"
        contents = [m["content"] for m in result.messages]
        assert history[3].content not in contents
    off = plan(c, Profile(), mode="off")
    assert off.status["m3"] == "excluded"


def test_ctx15_excluded_pairs_inside_the_summary_stay_excluded() -> None:
    history = pairs(4)
    history[1] = Message("m1", "assistant", "x", excluded=True)
    c = conv(history, summary=Summary("S", through="m3"))
    result = plan(c, Profile(), mode="full")
    assert [result.status[f"m{i}"] for i in range(4)] == ["excluded"] * 2 + ["summarized"] * 2


def test_ctx16_file_states() -> None:
    files = (
        File("pin", "p.txt", "P", message_id="m0", state="pinned"),
        File("exc", "e.txt", "E", message_id="m7", state="excluded"),
        File("new", "n.txt", "N", message_id="m7"),
        File("old", "o.txt", "O", message_id="m0"),
        File("loose", "l.txt", "L"),
    )
    c = conv(pairs(20), files=files)
    result = plan(c, Profile(), mode="window")
    assert result.files == {
        "pin": "pinned",
        "exc": "excluded",
        "new": "out_of_memory",
        "old": "out_of_memory",
        "loose": "in_memory",
    }
    full = plan(c, Profile(), mode="full")
    assert full.files["new"] == "in_memory" and full.files["old"] == "in_memory"
    assert full.tokens.files > 0
    names = [m["content"].split(":")[0] for m in full.messages if m["role"] == "system"]
    assert names == ["File p.txt", "File n.txt", "File o.txt", "File l.txt"]


@pytest.mark.parametrize(
    ("used", "level"),
    [(0, "muted"), (4_999, "muted"), (5_000, "light"), (7_500, "light"), (7_501, "red")],
)
def test_ctx17_level_follows_used_over_window(used: int, level: str) -> None:
    assert level_for(used, 10_000) == level


def test_ctx17_the_draft_counts_as_the_newest_user_message() -> None:
    base = plan(conv(pairs(2)), Profile(), mode="full")
    with_draft = plan(conv(pairs(2)), Profile(), mode="full", draft="hello world")
    assert with_draft.tokens.used > base.tokens.used
    assert with_draft.messages[-1] == {"role": "user", "content": "hello world"}
    assert len(with_draft.status) == 4


def test_ctx18_breakdown_adds_up_to_the_window() -> None:
    tools = ({"type": "function", "function": {"name": "f", "parameters": {}}},)
    c = conv(pairs(3), instructions="Be kind.", tools=tools, summary=Summary("S", "m1"))
    result = plan(c, Profile(), mode="full", draft="hi")
    t = result.tokens
    assert t.used == t.instructions + t.tools + t.summary + t.messages + t.files + t.images
    assert t.used + t.reserve + t.free == t.window
    assert t.tools > 0 and t.instructions > 0


def test_ctx18_free_is_never_negative() -> None:
    result = plan(conv(pairs(10)), Profile(), mode="off", draft="word " * 100_000)
    assert result.tokens.free == 0 and not result.fits


def test_ctx18_price_of_the_next_request_from_profile_prices() -> None:
    profile = Profile(prices=Prices(input_per_mtok=3.0, output_per_mtok=15.0))
    result = plan(conv(cached(pairs(5), 100)), profile, mode="full")
    assert result.price.next_request == pytest.approx(result.tokens.used * 3.0 / 1e6)
    assert not result.price.free and result.price.currency == "USD"


def test_ctx18_prices_are_looked_up_by_model_or_free() -> None:
    known = price_for(Profile(model="gpt-4o"))
    assert known.input_per_mtok > 0 and not known.free
    assert price_for(Profile(model="no-such-model-anywhere")).free
    assert price_for(Profile()).free
    own = Prices(input_per_mtok=1.0)
    assert price_for(Profile(model="gpt-4o", prices=own)) is own


def test_ctx18_compaction_price_is_added_when_compaction_runs() -> None:
    profile = Profile(prices=Prices(input_per_mtok=1.0, output_per_mtok=1.0))
    result = plan(conv(pairs(8)), profile, mode="economy")
    assert result.compaction.needed
    assert result.price.compaction > 0
    assert result.price.compaction == result.compaction.request.estimated_cost  # type: ignore[union-attr]


def test_ctx19_a_request_that_does_not_fit_is_refused_not_truncated() -> None:
    result = plan(conv(cached(pairs(2), 20_000)), Profile(), mode="full", draft="word " * 40_000)
    assert not result.fits
    with pytest.raises(DoesNotFit):
        result.require_fit()
    plan(conv(pairs(2)), Profile(), mode="full").require_fit()


def test_ctx20_a_tool_call_is_sent_with_its_result_or_not_at_all() -> None:
    history = tool_pair(1, with_result=False) + tool_pair(2)
    result = plan(conv(history), Profile(), mode="full")
    calls = [m for m in result.messages if "tool_calls" in m]
    results = [m for m in result.messages if m["role"] == "tool"]
    assert [c["tool_calls"][0]["id"] for c in calls] == ["call2"]
    assert [r["tool_call_id"] for r in results] == ["call2"]
    assert result.status["t1a"] == "out_of_memory"


def test_ctx20_an_orphan_result_is_never_sent() -> None:
    history = [
        Message("u", "user", "q"),
        Message("r", "tool", "result", tool_call_id="nobody"),
        Message("a", "assistant", "answer"),
    ]
    for mode in ("full", "window"):
        result = plan(conv(history), Profile(), mode=mode)  # type: ignore[arg-type]
        assert "result" not in [m["content"] for m in result.messages]
        assert result.status["r"] == "out_of_memory"


def test_ctx20_window_mode_keeps_a_call_and_its_result_together() -> None:
    history = tool_pair(1)
    profile = Profile(window_messages=3)
    result = plan(conv(history), profile, mode="window")
    # the final answer fits; the call+result unit needs 2 more slots, only 2 left: both go
    assert result.status["t1a"] == result.status["t1r"]


def test_plan_to_dict_has_exactly_the_contract_shape() -> None:
    d = plan(conv(pairs(2)), Profile(), mode="full", draft="x").to_dict()
    assert list(d) == [
        "mode",
        "fits",
        "messages",
        "status",
        "files",
        "tokens",
        "level",
        "compaction",
        "price",
    ]
    assert list(d["tokens"]) == [
        "instructions",
        "tools",
        "summary",
        "messages",
        "files",
        "images",
        "apps",  # APPS-3 (CONTRACT: the app-context line)
        "facts",  # CTX-24 (CONTRACT: the pinned facts line)
        "reserve",
        "free",
        "used",
        "window",
    ]
    assert list(d["compaction"]) == ["needed", "threshold", "messages", "covered", "rounds"]
    assert list(d["price"]) == ["next_request", "compaction", "currency", "free"]


def test_unknown_mode_is_refused() -> None:
    with pytest.raises(PlanInputError):
        plan(conv(pairs(1)), Profile(), mode="all")  # type: ignore[arg-type]


def test_exact_tokenizer_profile_is_used_when_none_given() -> None:
    c = conv(pairs(2))
    est = plan(c, Profile(), mode="full")
    exact = plan(c, Profile(tokenizer="o200k_base"), mode="full")
    assert exact.tokens.messages <= est.tokens.messages
    assert (
        exact.tokens.messages
        == plan(c, Profile(), mode="full", tokenizer=get_tokenizer("o200k_base")).tokens.messages
    )


def test_status_map_is_lazy_and_compares_by_content() -> None:
    c = Conversation(messages=tuple(pairs(5_000)))
    result = plan(c, Profile(), mode="window")
    status = result.status
    assert len(status) == 10_000
    assert "decided explicitly" in repr(status)
    assert status == dict(status.items())
    assert status != 3
    tail = status.tail()
    assert 12 <= len(tail) < 100
    assert all(status[k] == v for k, v in tail.items())


def test_ctx16_auto_files_count_toward_the_budget_with_their_message() -> None:
    history = cached(pairs(4), tokens=100)
    big = File("f", "big.txt", "x", message_id="m0", tokens=3_500)
    profile = Profile(context_window=8_192, answer_reserve=4_096)  # 4,096 for the request
    result = plan(conv(history, files=(big,)), profile, mode="full")
    # the oldest pair would bring 200 + 3,500 tokens: it is folded, and its file with it
    assert result.fits and result.compaction.needed
    assert result.compaction.request is not None and result.compaction.request.through == "m1"
    assert result.files == {"f": "out_of_memory"}
    assert result.status["m0"] == "summarized" and result.status["m2"] == "in_memory"
    assert result.tokens.used <= 4_096


def test_ctx6_the_draft_is_always_sent_even_with_a_tiny_budget() -> None:
    tiny = Profile(window_chars=10)
    result = plan(conv(pairs(2)), tiny, mode="window", draft="a fairly long question here")
    assert result.messages == ({"role": "user", "content": "[… 27 characters omitted …]"},)
    none = Profile(window_messages=0)
    result = plan(conv(pairs(2)), none, mode="window", draft="short")
    assert result.messages == ({"role": "user", "content": "short"},)
    assert set(result.status.values()) == {"out_of_memory"}
    result = plan(
        conv(pairs(2)), Profile(window_messages=0, window_chars=40), mode="window", draft="b" * 100
    )
    assert result.messages[0]["content"] == "b" * 13 + "[… 87 characters omitted …]"


def test_ctx9_compaction_cuts_a_first_pair_larger_than_the_summariser_window() -> None:
    history = [
        Message("u", "user", "word " * 20_000, tokens=20_004),
        Message("a", "assistant", "ok", tokens=5),
        *pairs(2, start=10),
    ]
    profile = Profile(context_window=8_192, summarizer_prices=Prices(1.0, 1.0))
    c = conv(history, summary=None)
    request = compaction_request(c, profile, mode="full", manual=True)
    assert request is not None and request.first_id == "u" and request.through == "m11"
    rounds = []
    result = run_fold(
        fold(c, profile, mode="full", manual=True),
        lambda r: rounds.append(r) or f"summary after round {r.number}",
    )
    # CTX-21: the long pair goes in pieces, each within the summariser's window, and only
    # a piece that ends a pair is stored
    pieces = [r for r in rounds if r.piece is not None]
    assert len(pieces) >= 2 and rounds[: len(pieces)] == pieces
    assert [r.commit for r in pieces] == [False] * (len(pieces) - 1) + [True]
    assert pieces[-1].through == "a" and pieces[-1].piece == (len(pieces), len(pieces))
    assert all(r.input_tokens < 8_192 for r in rounds)
    assert rounds[-1].through == "m11" and rounds[-1].commit and result.summary is not None
    assert result.summary.through == "m11"
    summary = Summary("S", through="m11", tokens=7)
    request = compaction_request(conv(history, summary=summary), profile, mode="full", manual=True)
    assert request is None  # one complete pair after the summary: nothing to compress yet


def test_ctx19_history_over_the_window_is_sendable_after_compaction() -> None:
    """A long history that overflows the window is not refused: compaction makes room."""
    history = cached(pairs(30), 1_200)  # 60 messages × 1,200 tokens: far past 32K
    result = plan(conv(history), Profile(), mode="full", draft="And now?")
    assert result.fits
    assert result.compaction.needed
    result.require_fit()


def test_ctx19_a_draft_too_big_even_after_compaction_is_not_sendable() -> None:
    history = cached(pairs(30), 1_200)
    result = plan(conv(history), Profile(), mode="full", draft="word " * 40_000)
    assert not result.fits
    with pytest.raises(DoesNotFit):
        result.require_fit()


@pytest.mark.parametrize("role", ["system", "developer", "user"])
def test_ctx22_instructions_summary_and_files_go_with_the_profiles_role(role: str) -> None:
    """Some chat templates drop system messages (Gemma in llama.cpp): the profile chooses the
    role the memory is sent with, and the summariser's instructions follow it."""
    profile = Profile(instructions_role=role)  # type: ignore[arg-type]
    pinned = File("f", "notes.txt", "the tiles are grey", state="pinned")
    c = Conversation(
        messages=pairs(6),
        summary=Summary("earlier facts", through="m1"),
        files=(pinned,),
        instructions="Answer briefly.",
    )
    result = plan(c, profile, mode="full", draft="next")
    assert [m["role"] for m in result.messages[:3]] == [role] * 3
    assert "earlier facts" in result.messages[1]["content"]
    first = next(fold(c, profile, mode="full", manual=True))
    if role == "user":
        assert [m["role"] for m in first.prompt] == ["user"]
        assert SUMMARY_SECTIONS[0] in first.prompt[0]["content"]
    else:
        assert [m["role"] for m in first.prompt] == [role, "user"]
