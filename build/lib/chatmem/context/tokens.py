"""Token counting (CTX-1, CTX-2): a conservative estimate, exact offline BPE, and calibration.

Every count the engine uses comes from a :class:`Tokenizer`.  Three exist:

``estimate`` (the default)
    Computed from the text's UTF-8 bytes without a vocabulary, and *conservative*: on ordinary
    text (English, Russian, Chinese, Japanese, Korean, code, JSON, digit runs, emoji, base64 —
    the corpus lives in ``tests/context/corpus.py``, the ratios are in ``bench/tokens.py``) it
    never counts fewer tokens than ``o200k_base``, ``cl100k_base`` or a tokenizer that splits
    every digit (Gemma, Llama 2, Mistral…), and it overcounts English prose by less than 1.5x.
    Each byte is mapped to a class with one ``bytes.translate`` and the classes are counted
    with ``bytes.count`` (both run in C), then weighted (:data:`ESTIMATE_WEIGHTS`):

    * an ASCII word costs one token, plus half a token per four letters (long words split);
    * every digit costs one token (some tokenizers split every digit, BPE groups them by
      three), and a digit run one more (the space or sign before it: digits take none);
    * a lower-to-upper case change costs 2.5 (camelCase starts a new piece; in base64 and
      other random letters, pieces are one to three characters long);
    * ASCII punctuation costs one token each; spaces and other whitespace a little;
    * a non-ASCII character costs by its UTF-8 length (2-byte scripts such as Cyrillic less
      than CJK, 4-byte emoji the most).

    The only hard bound for arbitrary bytes is one token per byte; the estimate is tuned, not
    proven, for the kinds above.

``o200k_base`` / ``cl100k_base``
    Exact counts with the ``bpe-openai`` package, whose vocabularies ship inside the package
    (nothing is downloaded).  It is imported lazily (about a second) on the first count, and
    long texts are fed in chunks split at newlines or spaces because the package refuses inputs
    of a million characters or 200,000 tokens.  Special-token text (``<|endoftext|>``) is
    counted as ordinary text, as it is when a user types it.

Calibration (CTX-2): :func:`calibrated` wraps a tokenizer with a factor learnt from the
provider's reported usage.  It only ever scales *up* (between 1 and :data:`MAX_CALIBRATION`):
a conservative counter that undercounts for some profile is corrected, one that overcounts
stays as it is, so calibration never makes the engine optimistic.

A message costs its text plus :data:`MESSAGE_OVERHEAD` (role and delimiters) plus the JSON of
its tool calls; tool definitions cost their JSON (:func:`count_tools`).  Storage computes
``count_message`` once per message and tokenizer and hands the result back in
``Message.tokens`` so planning never re-tokenizes history.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from chatmem.context.errors import PlanInputError
from chatmem.context.values import Message, ToolCall

TOKENIZER_NAMES: tuple[str, ...] = ("estimate", "o200k_base", "cl100k_base")

# Tokens a chat message costs beyond its text: role, start/end delimiters (OpenAI's documented
# chat format uses three to four per message; we take the larger).
MESSAGE_OVERHEAD = 4

# Calibration never scales more than this: a factor beyond it means the usage report is
# unrelated to the estimate (another model, cached prompt…), not that the estimate is off.
MAX_CALIBRATION = 4.0

# bpe-openai refuses inputs of >= 1,000,000 characters and outputs of > 200,000 tokens; one
# character is at most 4 bytes, hence at most 4 tokens: 40,000 characters are always safe.
_BPE_CHUNK_CHARS = 40_000

# Weights of the estimate (see the module docstring), tuned on tests/context/corpus.py.
ESTIMATE_WEIGHTS: Mapping[str, float] = {
    "word": 1.0,  # start of an ASCII letter run
    "letters4": 0.5,  # every complete group of 4 letters inside a run
    "number": 1.0,  # start of a digit run (the space or sign before it is a token of its own)
    "digit": 1.0,  # each digit: a tokenizer that splits every digit costs one token a digit
    "case_change": 2.5,  # a lower-case letter followed by an upper-case one (a new piece)
    "space": 0.1,
    "other_space": 0.5,  # tabs, newlines
    "punct": 1.0,
    "utf8_2": 0.75,  # a character of 2 UTF-8 bytes (Latin accents, Cyrillic, Greek, Hebrew…)
    "utf8_3": 1.5,  # 3 bytes (CJK, most symbols, joiners)
    "utf8_4": 3.2,  # 4 bytes (emoji, rare CJK)
}


@runtime_checkable
class Tokenizer(Protocol):
    """Counts tokens of a text.  Implementations are immutable and safe to share."""

    name: str

    def count(self, text: str) -> int: ...


def _class_table() -> bytes:
    table = bytearray(256)
    for byte in range(256):
        char = chr(byte)
        if byte >= 0xF0:
            table[byte] = ord("4")
        elif byte >= 0xE0:
            table[byte] = ord("3")
        elif byte >= 0xC0:
            table[byte] = ord("2")
        elif byte >= 0x80:
            table[byte] = ord("c")  # continuation byte: the lead byte already paid
        elif char.isupper():
            table[byte] = ord("U")
        elif char.isalpha():
            table[byte] = ord("l")
        elif char.isdigit():
            table[byte] = ord("D")
        elif char == " ":
            table[byte] = ord("S")
        elif char.isspace():
            table[byte] = ord("W")
        else:
            table[byte] = ord("P")
    return bytes(table)


def _only_table(*keep: int) -> bytes:
    """Map the ``keep`` classes to the first of them and every other class to ``N`` (to count
    run starts)."""
    return bytes(keep[0] if byte in keep else ord("N") for byte in range(256))


_CLASSES = _class_table()
_LETTERS_ONLY = _only_table(ord("L"), ord("U"), ord("l"))
_DIGITS_ONLY = _only_table(ord("D"))


class EstimateTokenizer:
    """The conservative byte-class estimate (see the module docstring)."""

    name = "estimate"

    def count(self, text: str) -> int:
        if not text:
            return 0
        classes = text.encode("utf-8", "surrogatepass").translate(_CLASSES)
        letters = classes.translate(_LETTERS_ONLY)
        digits = classes.translate(_DIGITS_ONLY)
        w = ESTIMATE_WEIGHTS
        total = (
            w["word"] * (letters.count(b"NL") + (letters[0] == ord("L")))
            + w["letters4"] * letters.count(b"LLLL")
            + w["number"] * (digits.count(b"ND") + (digits[0] == ord("D")))
            + w["digit"] * classes.count(b"D")
            + w["case_change"] * classes.count(b"lU")
            + w["space"] * classes.count(b"S")
            + w["other_space"] * classes.count(b"W")
            + w["punct"] * classes.count(b"P")
            + w["utf8_2"] * classes.count(b"2")
            + w["utf8_3"] * classes.count(b"3")
            + w["utf8_4"] * classes.count(b"4")
        )
        return math.ceil(total)

    def __repr__(self) -> str:
        return "EstimateTokenizer()"


class BpeTokenizer:
    """Exact counts with an OpenAI BPE encoding from the installed ``bpe-openai`` package."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._encoding: Any = None

    def _encode_len(self, text: str) -> int:
        if self._encoding is None:
            import bpe_openai  # lazy: importing it costs about a second

            self._encoding = bpe_openai.get_encoding(self.name)
        return len(self._encoding.encode_ordinary(text))

    def count(self, text: str) -> int:
        if not text:
            return 0
        total = 0
        for chunk in _chunks(text, _BPE_CHUNK_CHARS):
            total += self._encode_len(chunk)
        return total

    def __repr__(self) -> str:
        return f"BpeTokenizer({self.name!r})"


def _chunks(text: str, size: int) -> list[str]:
    """Split ``text`` into pieces of at most ``size`` characters, preferably before a newline
    or a space so that words (and BPE's pre-tokens) are not cut in half."""
    if len(text) <= size:
        return [text]
    pieces: list[str] = []
    start = 0
    end_of_text = len(text)
    while end_of_text - start > size:
        limit = start + size
        cut = text.rfind("\n", start + size // 2, limit)
        if cut <= start:
            cut = text.rfind(" ", start + size // 2, limit)
        if cut <= start:
            cut = limit
        pieces.append(text[start:cut])
        start = cut
    pieces.append(text[start:])
    return pieces


class CalibratedTokenizer:
    """A tokenizer scaled up by a factor learnt from provider usage (CTX-2)."""

    def __init__(self, base: Tokenizer, factor: float) -> None:
        self.base = base
        self.factor = factor
        self.name = base.name

    def count(self, text: str) -> int:
        raw = self.base.count(text)
        return max(raw, math.ceil(raw * self.factor))

    def __repr__(self) -> str:
        return f"CalibratedTokenizer({self.base!r}, {self.factor})"


def calibration_factor(estimated: int, reported: int) -> float:
    """The factor to pass to :func:`calibrated` after a request estimated at ``estimated``
    prompt tokens that the provider reported as ``reported``.  Clamped to [1, MAX_CALIBRATION]:
    only undercounting is corrected (the estimate stays conservative)."""
    if estimated <= 0 or reported <= 0:
        return 1.0
    return min(MAX_CALIBRATION, max(1.0, reported / estimated))


def calibrated(tokenizer: Tokenizer, factor: float) -> Tokenizer:
    """``tokenizer`` scaled by ``factor`` (clamped to [1, MAX_CALIBRATION]): never below the raw
    count, so calibration can only bring an undercounting estimate up to reported usage."""
    if not math.isfinite(factor):
        raise PlanInputError(f"calibration factor must be a finite number, not {factor!r}")
    clamped = min(MAX_CALIBRATION, max(1.0, factor))
    if clamped == 1.0:
        return tokenizer
    return CalibratedTokenizer(tokenizer, clamped)


@functools.cache
def get_tokenizer(name: str) -> Tokenizer:
    """The shared tokenizer called ``name`` (one of :data:`TOKENIZER_NAMES`)."""
    if name == "estimate":
        return EstimateTokenizer()
    if name in TOKENIZER_NAMES:
        return BpeTokenizer(name)
    raise PlanInputError(f"unknown tokenizer {name!r}; choose one of {', '.join(TOKENIZER_NAMES)}")


def count_text(text: str, tokenizer: Tokenizer) -> int:
    """Tokens of a bare text (no message overhead)."""
    return tokenizer.count(text)


def tool_calls_json(
    message: Message, calls: Sequence[ToolCall] | None = None
) -> list[dict[str, Any]]:
    """The OpenAI wire shape of a message's tool calls (or of ``calls``, a subset of them)."""
    return [
        {
            "id": call.id,
            "type": "function",
            "function": {"name": call.name, "arguments": call.arguments},
        }
        for call in (message.tool_calls if calls is None else calls)
    ]


def count_message(message: Message, tokenizer: Tokenizer) -> int:
    """Tokens a stored message costs in a request: overhead + content + tool-call JSON.

    This is what storage caches in ``Message.tokens`` (CTX-2)."""
    total = MESSAGE_OVERHEAD + tokenizer.count(message.content)
    if message.tool_calls:
        total += tokenizer.count(
            json.dumps(tool_calls_json(message), ensure_ascii=False, separators=(",", ":"))
        )
    if message.tool_call_id:
        total += tokenizer.count(message.tool_call_id)
    return total


def count_tools(tools: Sequence[Mapping[str, Any]], tokenizer: Tokenizer) -> int:
    """Tokens of the tool definitions sent with a request (their JSON, CTX-1)."""
    if not tools:
        return 0
    return tokenizer.count(
        json.dumps(list(tools), ensure_ascii=False, separators=(",", ":"), sort_keys=True)
    )
