"""Token counting: CTX-1 (conservative estimate, exact BPE, overhead, tools) and CTX-2."""

from __future__ import annotations

import re

import pytest

from chatmem.context import (
    TOKENIZER_NAMES,
    Message,
    PlanInputError,
    ToolCall,
    calibrated,
    calibration_factor,
    count_message,
    count_text,
    count_tools,
    get_tokenizer,
)
from chatmem.context.tokens import MAX_CALIBRATION, MESSAGE_OVERHEAD, _chunks

from . import corpus
from .corpus import CORPUS, ENGLISH

EXACT = ("o200k_base", "cl100k_base")


@pytest.mark.parametrize("encoding", EXACT)
@pytest.mark.parametrize("sample", sorted(CORPUS))
def test_ctx1_estimate_never_undercounts_real_tokenizers(sample: str, encoding: str) -> None:
    text = CORPUS[sample]
    assert get_tokenizer("estimate").count(text) >= get_tokenizer(encoding).count(text)


def test_ctx1_estimate_counts_at_least_one_token_per_digit() -> None:
    estimate = get_tokenizer("estimate")
    for text in ("7", "42", "1234567890" * 50, "3.14159 2.71828", "+31 (706) 657-3136"):
        digits = sum(ch.isdigit() for ch in text)
        assert estimate.count(text) >= digits
        assert estimate.count(text) >= corpus.per_digit_count(text)


def test_ctx1_issue_11_order_numbers_are_not_undercounted() -> None:
    # issue 11: 11,270 characters of order numbers were estimated at 5,829 tokens; Gemma's
    # tokenizer (one token per digit) counted 11,243.
    text = corpus.order_numbers(1, 324)
    assert 11_000 <= len(text) <= 11_500
    digits = sum(ch.isdigit() for ch in text)
    estimate = get_tokenizer("estimate").count(text)
    assert estimate >= corpus.per_digit_count(text) > digits > 9_000


def test_per_digit_model_is_o200k_with_every_digit_split() -> None:
    # per_digit_count's shortcut agrees with o200k_base on the text with every digit apart
    o200k = get_tokenizer("o200k_base")
    for text in [*corpus.kinds()["digits"][:4], corpus.JSON, corpus.MIXED]:
        spaced = re.sub(r"(?<=[0-9])(?=[0-9])", " ", text)
        spaces = len(spaced) - len(text)
        assert corpus.per_digit_count(text) == o200k.count(spaced) - spaces


@pytest.mark.parametrize("tokenizer", corpus.REAL_TOKENIZERS)
@pytest.mark.parametrize("kind", sorted(corpus.kinds()))
def test_ctx1_ratio_table_estimate_never_undercounts(kind: str, tokenizer: str) -> None:
    """The table of bench/tokens.py: every estimate/real ratio >= 1, by kind and tokenizer."""
    estimate = get_tokenizer("estimate")
    for text in corpus.kinds()[kind]:
        real = corpus.real_count(tokenizer, text)
        assert estimate.count(text) >= real, (kind, tokenizer, text[:60])


def test_ctx1_estimate_overcounts_english_prose_by_at_most_one_and_a_half() -> None:
    estimate = get_tokenizer("estimate").count(ENGLISH)
    for encoding in EXACT:
        assert estimate <= 1.5 * get_tokenizer(encoding).count(ENGLISH)


@pytest.mark.parametrize("encoding", EXACT)
def test_ctx1_exact_counts_match_the_packaged_encoding(encoding: str) -> None:
    import bpe_openai

    text = CORPUS["mixed"] + CORPUS["code"]
    expected = len(bpe_openai.get_encoding(encoding).encode_ordinary(text))
    assert get_tokenizer(encoding).count(text) == expected


def test_ctx1_special_token_text_is_counted_as_plain_text() -> None:
    assert get_tokenizer("o200k_base").count("<|endoftext|>") > 1


def test_ctx1_very_long_text_is_counted_in_chunks() -> None:
    text = "lorem ipsum dolor " * 60_000  # over a million characters
    tokens = get_tokenizer("o200k_base").count(text)
    assert 100_000 < tokens < 300_000


def test_chunks_split_before_spaces_and_cover_everything() -> None:
    text = "abc def\nghi " * 100
    pieces = _chunks(text, 50)
    assert "".join(pieces) == text
    assert all(len(p) <= 50 for p in pieces)
    assert _chunks("x" * 120, 50) == ["x" * 50, "x" * 50, "x" * 20]


def test_empty_text_costs_nothing() -> None:
    for name in TOKENIZER_NAMES:
        assert count_text("", get_tokenizer(name)) == 0


def test_unknown_tokenizer_is_refused() -> None:
    with pytest.raises(PlanInputError, match="unknown tokenizer"):
        get_tokenizer("gpt2")


def test_tokenizers_are_shared_instances() -> None:
    assert get_tokenizer("estimate") is get_tokenizer("estimate")
    assert "BpeTokenizer" in repr(get_tokenizer("cl100k_base"))


def test_ctx1_message_count_includes_overhead_and_tool_call_json() -> None:
    tok = get_tokenizer("estimate")
    plain = Message("m1", "assistant", "hello there")
    assert count_message(plain, tok) == MESSAGE_OVERHEAD + tok.count("hello there")
    calling = Message("m2", "assistant", "hello there", tool_calls=(ToolCall("c1", "f", "{}"),))
    result = Message("m3", "tool", "hello there", tool_call_id="c1")
    assert count_message(calling, tok) > count_message(plain, tok)
    assert count_message(result, tok) > count_message(plain, tok)


def test_ctx1_tool_definitions_are_counted() -> None:
    tok = get_tokenizer("estimate")
    schema = {"type": "function", "function": {"name": "lookup", "parameters": {}}}
    assert count_tools([], tok) == 0
    assert count_tools([schema], tok) > 5
    assert count_tools([schema, schema], tok) > count_tools([schema], tok)


def test_ctx2_calibration_only_scales_up_and_is_bounded() -> None:
    base = get_tokenizer("estimate")
    assert calibrated(base, 0.5) is base  # overcounting is left as it is: stays conservative
    up = calibrated(base, 1.3)
    assert up.count(ENGLISH) >= base.count(ENGLISH)
    assert up.count(ENGLISH) == -(-base.count(ENGLISH) * 13 // 10)
    assert up.name == "estimate"
    huge = calibrated(base, 100.0)
    assert huge.count("word") <= MAX_CALIBRATION * base.count("word") + 1
    with pytest.raises(PlanInputError):
        calibrated(base, float("nan"))


def test_ctx2_calibration_factor_from_reported_usage() -> None:
    assert calibration_factor(100, 120) == pytest.approx(1.2)
    assert calibration_factor(100, 80) == 1.0
    assert calibration_factor(0, 80) == 1.0
    assert calibration_factor(10, 1_000) == MAX_CALIBRATION
