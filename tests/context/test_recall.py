"""The pure parts of recall (issue 17): the switch, the scope, passages and their bound."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from chatmem.context import Conversation, Message, Profile, get_tokenizer, plan
from chatmem.context.recall import (
    ELLIPSIS,
    MAX_RESULT_TOKENS,
    MIN_RESULT_TOKENS,
    RECALL_SCHEMA,
    RECALL_TOOL,
    RecallHit,
    passage,
    query_words,
    recall_enabled,
    recall_scope,
    render_recall,
    result_budget,
    with_recall,
)
from chatmem.context.values import Summary

TOKENS = get_tokenizer("estimate")


@pytest.mark.parametrize(
    ("mode", "conversation", "profile", "expected"),
    [
        ("economy", None, None, True),
        ("full", None, None, True),
        ("off", None, None, False),
        ("window", None, None, False),
        ("full", None, False, False),
        ("window", None, True, True),
        ("full", False, True, False),
        ("off", True, False, True),
    ],
)
def test_the_conversation_wins_then_the_profile_then_the_mode(
    mode: str, conversation: bool | None, profile: bool | None, expected: bool
) -> None:
    assert recall_enabled(mode, conversation, profile) is expected  # type: ignore[arg-type]


def test_with_recall_offers_the_schema_once_and_an_mcp_tool_of_that_name_gives_way() -> None:
    mcp = {"type": "function", "function": {"name": RECALL_TOOL, "parameters": {}}}
    other = {"type": "function", "function": {"name": "add", "parameters": {}}}
    assert with_recall([mcp, other], False) == [mcp, other]
    assert with_recall([mcp, other], True) == [other, RECALL_SCHEMA]


def test_the_scope_is_what_the_plan_does_not_send() -> None:
    messages = [
        Message(id=f"m{i}", role="user" if i % 2 else "assistant", content=f"text {i}")
        for i in range(1, 11)
    ]
    # m1..m6 summarised, m7/m8 excluded, m9/m10 in memory.
    messages[6] = Message(id="m7", role="user", content="text 7", excluded=True)
    conversation = Conversation(messages=messages, summary=Summary(text="s", through="m6"))
    result = plan(conversation, Profile(), mode="full", draft="next")
    scope = recall_scope(result.status)
    sent = {mid for mid, status in result.status.items() if status == "in_memory"}
    assert sent == {"m9", "m10"}
    assert scope.before is not None
    older = {m.id for m in messages[: [m.id for m in messages].index(scope.before)]}
    assert (older | scope.also) & sent == set()
    assert older | scope.also == {m.id for m in messages} - sent


def test_a_short_message_is_returned_whole() -> None:
    assert passage("  The budget is 48,250 euros.  ", ["budget"], 100, TOKENS) == (
        "The budget is 48,250 euros."
    )


def test_a_long_message_is_cut_at_sentences_around_the_match() -> None:
    filler = " ".join(f"Sentence {k} talks about the weather." for k in range(200))
    text = f"{filler} The budget we agreed is 48,250 euros. {filler}"
    cut = passage(text, query_words("agreed budget"), 60, TOKENS)
    assert "The budget we agreed is 48,250 euros." in cut
    assert cut.startswith(ELLIPSIS + " Sentence") and cut.endswith(". " + ELLIPSIS)
    assert TOKENS.count(cut) <= 60


def test_one_endless_sentence_is_cut_at_words_and_one_endless_word_at_characters() -> None:
    words = " ".join(f"word{k}" for k in range(2_000))
    text = f"{words} budget 48250 {words}"
    cut = passage(text, ["budget"], 40, TOKENS)
    assert "budget 48250" in cut and cut.startswith(ELLIPSIS) and cut.endswith(ELLIPSIS)
    assert TOKENS.count(cut) <= 40
    blob = "x" * 50_000
    cut = passage(blob, ["budget"], 30, TOKENS)
    assert cut.startswith("xxx") and cut.endswith(ELLIPSIS) and TOKENS.count(cut) <= 30


def test_the_result_names_each_message_and_its_time() -> None:
    hits = [RecallHit("m3", "user", "2026-11-30 10:00 UTC", "The budget is 48,250 euros.")]
    text = render_recall("budget", hits, 500, TOKENS)
    assert "[message m3 · user · 2026-11-30 10:00 UTC]\nThe budget is 48,250 euros." in text
    assert render_recall("budget", [], 500, TOKENS).startswith("No earlier message")


def test_the_budget_follows_the_free_window() -> None:
    assert result_budget(1_000_000) == MAX_RESULT_TOKENS
    assert result_budget(1_000) == 500
    assert result_budget(0) == MIN_RESULT_TOKENS


@given(
    contents=st.lists(st.text(min_size=0, max_size=3_000), min_size=0, max_size=25),
    query=st.text(min_size=1, max_size=300),
    budget=st.integers(min_value=MIN_RESULT_TOKENS, max_value=3_000),
)
def test_a_result_never_exceeds_its_budget(contents: list[str], query: str, budget: int) -> None:
    hits = [RecallHit(f"m{i}", "user", "2026-11-30 10:00 UTC", c) for i, c in enumerate(contents)]
    assert TOKENS.count(render_recall(query, hits, budget, TOKENS)) <= budget


@given(
    text=st.text(min_size=0, max_size=5_000),
    words=st.lists(st.text(min_size=1, max_size=10), max_size=5),
    budget=st.integers(min_value=8, max_value=500),
)
def test_a_passage_never_exceeds_its_budget(text: str, words: list[str], budget: int) -> None:
    assert TOKENS.count(passage(text, words, budget, TOKENS)) <= budget


def test_the_scope_of_a_plain_mapping_lists_what_is_not_sent() -> None:
    scope = recall_scope({"a": "summarized", "b": "in_memory", "c": "excluded"})
    assert scope.before == "a" and scope.also == {"a", "c"}


def test_matches_beyond_a_worthwhile_share_are_counted() -> None:
    hits = [
        RecallHit(f"m{i}", "assistant", "2026-11-30 10:00 UTC", "budget " * 400) for i in range(20)
    ]
    text = render_recall("budget", hits, MIN_RESULT_TOKENS, TOKENS)
    assert "more matching messages left out" in text
    assert TOKENS.count(text) <= MIN_RESULT_TOKENS


def test_a_passage_without_the_words_starts_at_the_beginning() -> None:
    """The index folds accents ("cafe" finds "café"); the passage then starts at the top."""
    text = "Le café est ouvert. " + "Il fait beau aujourd'hui. " * 400
    cut = passage(text, ["cafe"], 30, TOKENS)
    assert cut.startswith("Le café est ouvert.") and cut.endswith(ELLIPSIS)
