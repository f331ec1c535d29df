"""The hard-fact extractor (CTX-24): every planted fact of each kind is found, verbatim and
in any script; fact-free text yields none; the same text always gives the same facts."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chatmem.context.facts import FACT_KINDS, contains, extract, normalise

#: Facts of every kind, as a user or a tool would write them.
PLANTED: dict[str, list[str]] = {
    "amount": ["4,200 EUR", "12.5%", "€ 1.299,00", "12 500 ₽", "$1,250.00", "42 kg", "300 евро"],
    "number": ["1,250,000", "48213", "3.14159", "1 000 000"],
    "date": ["2025-03-14", "14.03.2025", "12 March 2025", "March 12, 2025", "3 марта 2025"],
    "time": ["14:30", "9:15", "08:45:10"],
    "identifier": [
        "ORD-58213",
        "INV2024-77",
        "v2.3.1",
        "550e8400-e29b-41d4-a716-446655440000",
        "3f2a9c1e7b",
        "ЗАК-4471",
    ],
    "url": ["https://example.com/docs/setup?id=42", "http://intranet.local:8080/a/b"],
    "email": ["anna.k@example.org", "ольга@пример.рф"],
    "path": ["/etc/app/config.yaml", "src/app.py", "C:\\data\\x.csv", "~/notes/todo.md"],
    "code": ["`make deploy --env=prod`", "`SELECT * FROM orders`"],
    "quote": [
        "“payment within 30 days of delivery”",
        "«оплата в течение тридцати дней после поставки»",
        '"the seller bears the risk"',
        "„die Ware bleibt Eigentum des Verkäufers“",
    ],
}
CASES = [(kind, fact) for kind, facts in PLANTED.items() for fact in facts]

# Prose with no hard fact: letters of several scripts, spaces and sentence punctuation.
_LETTERS = st.sampled_from(
    list("abcdefghijklmnopqrstuvwxyzABCDEFGHIJ")
    + list("абвгдеёжзийклмнопрстуфхцчшщыэюяАБВГД")
    + list("αβγδεζηθ")
    + list("中文字漢語")
    + list("éèàüößç")
)
_WORDS = st.text(_LETTERS, min_size=1, max_size=12)
_PUNCT = st.sampled_from(["", ",", ".", "!", "?", ";", " -", ":"])
PROSE = st.lists(st.tuples(_WORDS, _PUNCT), max_size=60).map(
    lambda words: " ".join(w + p for w, p in words)
)


def test_every_kind_is_planted() -> None:
    assert set(PLANTED) == set(FACT_KINDS)


@pytest.mark.parametrize(("kind", "fact"), CASES)
def test_a_planted_fact_is_found_verbatim_with_its_kind(kind: str, fact: str) -> None:
    text = f"Notes from today. Please remember {fact}. That is all."
    found = extract(text)
    assert [(f.kind, f.text) for f in found] == [(kind, fact)]
    assert text[found[0].start :].startswith(fact)


@settings(max_examples=150, deadline=None)
@given(before=PROSE, after=PROSE, planted=st.lists(st.sampled_from(CASES), min_size=1, max_size=6))
def test_planted_facts_are_found_in_any_prose(
    before: str, after: str, planted: list[tuple[str, str]]
) -> None:
    pieces = [before]
    for _, fact in planted:
        pieces.append(f" ({fact}) ")
    pieces.append(after)
    text = " ".join(pieces)
    found = [(f.kind, f.text) for f in extract(text)]
    assert found == planted


@settings(max_examples=300, deadline=None)
@given(PROSE)
def test_no_fact_is_invented_from_fact_free_text(text: str) -> None:
    assert extract(text) == []


@settings(max_examples=100, deadline=None)
@given(PROSE, st.sampled_from(CASES))
def test_extraction_is_deterministic(text: str, case: tuple[str, str]) -> None:
    full = f"{text} {case[1]} {text}"
    assert extract(full) == extract(full)


def test_short_numbers_and_words_are_not_facts() -> None:
    assert extract("We met 2 times in 12 days, it's fine; mp3 and B2B are words.") == []


def test_an_apostrophe_opens_no_quote_but_a_quote_mark_does() -> None:
    text = "I don't think it's right, but 'pay the invoice tomorrow morning' she said."
    assert [f.text for f in extract(text)] == ["'pay the invoice tomorrow morning'"]


def test_a_sentence_full_stop_is_not_part_of_an_identifier_or_url() -> None:
    found = extract("Upgrade to v2.3.1. See https://example.com/x.")
    assert [f.text for f in found] == ["v2.3.1", "https://example.com/x"]


@pytest.mark.parametrize(
    ("summary", "fact", "held"),
    [
        ("the budget is 4200 eur", "4,200 EUR", True),
        ("the budget is 4 200   EUR", "4,200 EUR", True),
        ("digest 3F2A9C1E7B", "3f2a9c1e7b", True),
        ("the order ORD-58213 shipped", "ORD-58213", True),
        ("we paid 14,500 EUR", "4,500 EUR", False),  # not inside another number
        ("v2.3.10", "v2.3.1", False),
    ],
)
def test_a_summary_holds_a_fact_after_normalising(summary: str, fact: str, held: bool) -> None:
    assert contains(normalise(summary), normalise(fact)) is held
