"""The SEC-1 bounds without a server: the streaming scanner agrees with a real parser however
the bytes are cut into chunks, and stays cheap on hostile input."""

from __future__ import annotations

import json
import time
import tracemalloc
from typing import Any
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import chatmem.bounds
from chatmem.bounds import MAX_INT, Bounds, JsonScanner, check_value, clean_value, loads
from chatmem.errors import InvalidInput

TEXT = st.text(
    alphabet=st.sampled_from(['"', "\\", "[", "]", "{", "}", ":", ",", "a", "é", "\n", "😀", "\0"]),
    max_size=12,
)
VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4),
    max_leaves=30,
)


def depth_of(value: Any) -> int:
    if isinstance(value, list):
        return 1 + max((depth_of(v) for v in value), default=0)
    if isinstance(value, dict):
        return 1 + max((depth_of(v) for v in value.values()), default=0)
    return 0


def longest_string(value: Any) -> int:
    """The longest string as sent (escaped, with its quotes)."""
    if isinstance(value, str):
        return len(json.dumps(value, ensure_ascii=False).encode())
    if isinstance(value, list):
        return max((longest_string(v) for v in value), default=0)
    if isinstance(value, dict):
        return max((max(longest_string(k), longest_string(v)) for k, v in value.items()), default=0)
    return 0


def feed(scanner: JsonScanner, data: bytes, cuts: list[int]) -> None:
    start = 0
    for cut in sorted({c % (len(data) + 1) for c in cuts}):
        scanner.feed(data[start:cut])
        start = cut
    scanner.feed(data[start:])


@settings(max_examples=300, deadline=None)
@given(VALUES, st.lists(st.integers(0, 10_000), max_size=8), st.integers(1, 6))
def test_the_scanner_measures_depth_like_a_parser_whatever_the_chunks(
    value: Any, cuts: list[int], limit: int
) -> None:
    data = json.dumps(value, ensure_ascii=False).encode()
    scanner = JsonScanner(Bounds(max_depth=limit))
    if depth_of(value) > limit:
        with pytest.raises(InvalidInput, match="deeper than"):
            feed(scanner, data, cuts)
    else:
        feed(scanner, data, cuts)
        assert scanner.depth == 0


@settings(max_examples=300, deadline=None)
@given(VALUES, st.lists(st.integers(0, 10_000), max_size=8))
def test_the_scanner_bounds_strings_and_sees_top_keys_and_nul(value: Any, cuts: list[int]) -> None:
    data = json.dumps(value, ensure_ascii=False).encode()
    limit = 8
    keys: list[str] = []
    scanner = JsonScanner(Bounds(max_string_bytes=limit), on_top_key=keys.append)
    if longest_string(value) - 2 > limit:
        with pytest.raises(InvalidInput, match="longer than"):
            feed(scanner, data, cuts)
        return
    feed(scanner, data, cuts)
    if isinstance(value, dict):
        assert keys == list(value)
    else:
        assert keys == []
    if "\\u0000" in data.decode():
        assert scanner.saw_nul


class ExactScanner(JsonScanner):
    """The scanner without its skim: every chunk read a bracket at a time."""

    def _skim(self, chunk: bytes, pos: int, base: int) -> int:
        return pos


def outcome(scanner: JsonScanner, data: bytes, cuts: list[int]) -> tuple[Any, ...]:
    try:
        feed(scanner, data, cuts)
    except InvalidInput as exc:
        return ("refused", str(exc))
    return (scanner.depth, scanner.offset, scanner._item_start, scanner.saw_nul)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(VALUES, max_size=6),
    st.lists(st.integers(0, 10_000), max_size=8),
    st.integers(1, 8),
    st.integers(1, 40),
    st.integers(1, 300),
    st.sampled_from([None, 1, 2, 3]),
)
def test_the_skim_agrees_with_the_exact_scan(
    items: list[Any], cuts: list[int], depth: int, string: int, item: int, item_depth: int | None
) -> None:
    """Whole chunks are skimmed (issue 16): same refusals, offsets and state as reading a
    bracket at a time, wherever the bounds and the cuts fall."""
    data = json.dumps(items, ensure_ascii=False).encode()
    bounds = Bounds(max_depth=depth, max_string_bytes=string, max_item_bytes=item)
    # Skimmed however dense in quotes (these values are mostly short strings).
    with mock.patch.object(chatmem.bounds, "_SKIM_BYTES_PER_QUOTE", 0):
        skimmed = outcome(JsonScanner(bounds, item_depth=item_depth), data, cuts)
    assert skimmed == outcome(ExactScanner(bounds, item_depth=item_depth), data, cuts)


def test_a_long_text_export_is_skimmed_with_its_bounds() -> None:
    """Text-heavy conversations in 64 KiB chunks (the skim's case): a conversation over the
    bound is still refused at the bracket that crosses it, as by the exact scan."""
    text = 'words, "quoted" \\ [brackets] {braces} \u0000 and more; ' * 40
    conversation = {"id": "c", "mapping": {f"n{i}": {"parts": [text]} for i in range(30)}}
    data = json.dumps([conversation] * 40).encode()
    size = len(json.dumps(conversation).encode())
    cuts = list(range(65536, len(data), 65536))
    for limit in (size - 2, size - 1, 10 * size):
        bounds = Bounds(max_item_bytes=limit)
        skimmed = outcome(JsonScanner(bounds, item_depth=2), data, cuts)
        assert skimmed == outcome(ExactScanner(bounds, item_depth=2), data, cuts)
        assert (skimmed[0] == "refused") == (limit < size - 1)


def test_a_value_string_never_reads_as_a_top_key() -> None:
    # The closing quote of "][\\n" and the opening quote of ":" look like a string ", "
    # followed by a colon to a search that may start anywhere.
    keys: list[str] = []
    JsonScanner(Bounds(), on_top_key=keys.append).feed(b'{"": "][\\n", ":": null}')
    assert keys == ["", ":"]


def test_a_nul_escape_cut_into_single_bytes_is_seen() -> None:
    scanner = JsonScanner(Bounds())
    for byte in b'["\\u0000"]':
        scanner.feed(bytes([byte]))
    assert scanner.saw_nul


def test_conversation_size_is_bounded_at_its_depth() -> None:
    item = b'{"id":"c","messages":[' + b'{"content":"xxxxxxxxxx"},' * 100 + b"{}]}"
    doc = b'{"format":"chatmem.export/1","conversations":[' + item + b"," + item + b"]}"
    JsonScanner(Bounds(max_item_bytes=len(item)), item_depth=3).feed(doc)
    with pytest.raises(InvalidInput, match="One conversation is larger"):
        JsonScanner(Bounds(max_item_bytes=len(item) - 10), item_depth=3).feed(doc)
    # One huge string inside a conversation is caught while it streams, not at its end.
    scanner = JsonScanner(Bounds(max_item_bytes=100_000), item_depth=2)
    scanner.feed(b'[{"content":"')
    with pytest.raises(InvalidInput, match="One conversation is larger"):
        for _ in range(10):
            scanner.feed(b"x" * 65536)


@pytest.mark.parametrize(
    "data",
    [
        b'{"extra":' + b"[" * 200_000 + b"]" * 200_000 + b"}",
        b"[" * 5_000_000,
        b'{"a":' * 1_000_000,
    ],
)
def test_hostile_nesting_costs_nothing(data: bytes) -> None:
    tracemalloc.start()
    started = time.perf_counter()
    scanner = JsonScanner(Bounds())
    with pytest.raises(InvalidInput, match="deeper than 64"):
        for start in range(0, len(data), 65536):
            scanner.feed(data[start : start + 65536])
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert time.perf_counter() - started < 1
    assert peak < 1024 * 1024


def test_escapes_across_chunks_are_linear() -> None:
    """A string of escaped quotes and backslashes spanning many chunks: no per-quote Python
    loop, no rescanning."""
    data = b'["' + b'\\"\\\\' * 2_000_000 + b'"]'
    scanner = JsonScanner(Bounds())
    started = time.perf_counter()
    for start in range(0, len(data), 65536):
        scanner.feed(data[start : start + 65536])
    assert scanner.depth == 0
    assert time.perf_counter() - started < 2


@pytest.mark.parametrize(
    ("data", "needle"),
    [
        (b'{"p":1e999}', "p: numbers must be finite"),
        (b'{"p":[NaN]}', "p[0]: numbers must be finite"),
        (b'{"n":' + str(MAX_INT + 1).encode() + b"}", "n: the number is out of range"),
        (b'{"n":-' + str(MAX_INT + 2).encode() + b"}", "n: the number is out of range"),
        (b'{"t":"\\u0000"}', "t: text must not contain NUL"),
        (b'{"t":{"u":"\\ud83d"}}', "t.u: text must be valid Unicode"),
        (b"[" + b"1," * 100_000 + b"1]", "more than 100,000 items"),
    ],
)
def test_loads_refuses_values_naming_the_field(data: bytes, needle: str) -> None:
    with pytest.raises(InvalidInput, match=needle.replace("[", r"\[").replace("]", r"\]")):
        loads(data)


def test_loads_accepts_the_edges() -> None:
    value = loads(
        b'{"n":9223372036854775807,"m":-9223372036854775808,"f":1.5e308,"t":"\\ud83d\\ude00"}'
    )
    assert value == {"n": MAX_INT, "m": -MAX_INT - 1, "f": 1.5e308, "t": "😀"}
    check_value(value)


def test_clean_value_replaces_nul_and_lone_surrogates_everywhere() -> None:
    assert clean_value({"a\x00": ["x\ud800", {"k": "\x00"}], "n": 1}) == {
        "a\ufffd": ["x\ufffd", {"k": "\ufffd"}],
        "n": 1,
    }
