"""Hard facts of a text (CTX-24): what a summary must not lose.

Theory of operation
-------------------
A *hard fact* is a piece of text a reader needs word for word: a number of three or more
digits or with separators, a decimal, an amount with its unit, currency or percent sign
(``4,200 EUR``, ``12.5%``, ``€ 1.299,00``), a date or a time, an identifier mixing letters and
digits (``ORD-58213``, ``INV2024-77``, ``v2.3.1``, UUIDs, hex digests), a URL, an e-mail
address, a file path (``/etc/app/config.yaml``, ``src/app.py``, ``C:\\data\\x.csv``), a code
span in backticks, a quoted clause of 3 to 30 words (any quote style).  Letters are Unicode
letters, so Russian (or any script) identifiers, month names and quotes are found as well.

Speed.  The text is scanned once for *trigger* characters (a digit, ``@ / \\ ` `` a quote
mark, a currency sign); only there does the full pattern run, anchored at the start of the
word the trigger is in.  Prose without triggers costs one C-level scan, so the extractor's
cost grows with the facts, not with the text (the guard's bar: under 1 ms per 10,000 tokens).

Deterministic: the same text gives the same facts, in the order they appear.  This module
imports nothing else of chatmem.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

FactKind = Literal[
    "number", "amount", "date", "time", "identifier", "url", "email", "path", "code", "quote"
]
FACT_KINDS: tuple[FactKind, ...] = (
    "number",
    "amount",
    "date",
    "time",
    "identifier",
    "url",
    "email",
    "path",
    "code",
    "quote",
)

#: Quoted clauses: fewest and most words.
QUOTE_MIN_WORDS = 3
QUOTE_MAX_WORDS = 30
#: Longest code span kept as one fact (characters).
CODE_MAX_CHARS = 300

_MONTHS = (
    "January|February|March|April|May|June|July|August|September|October|November|December|"
    "Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec|"
    "января|февраля|марта|апреля|мая|июня|июля|августа|сентября|октября|ноября|декабря|"
    "январь|февраль|март|апрель|май|июнь|июль|август|сентябрь|октябрь|ноябрь|декабрь|"
    "gennaio|febbraio|aprile|maggio|giugno|luglio|agosto|settembre|ottobre|dicembre|"
    "Januari|Februari|Maret|Mei|Juni|Juli|Agustus|Oktober|Desember"
)
_CURRENCY_WORDS = (
    "EUR|USD|GBP|RUB|JPY|CHF|CNY|INR|IDR|CAD|AUD|SEK|NOK|PLN|BTC|"
    "euros?|dollars?|pounds?|roubles?|rubles?|yen|"
    "евро|долларов|доллара|доллар|рублей|рубля|рубль|руб\\.?|тыс\\.|млн|млрд"
)
_UNITS = (
    "%|‰|°C|°F|°|"
    "kWh|kW|MWh|GHz|MHz|kHz|Hz|TB|GB|MB|KB|kB|Gb|Mb|ms|km/h|mph|"
    "km|cm|mm|mg|kg|ml|m²|m2|m³|sq ?ft|ft|lb|lbs|oz|mi|"
    "кг|км|см|мм|мл|г|л|м|ГБ|МБ|ТБ|кВт|шт\\.?|"
    "m|g|l|t|h|V|W|A"
)
_SYMBOLS = "€$£¥₽₹₩₺"
# A number: grouped thousands (comma, dot, apostrophe, a thin or no-break space, or a plain
# space before exactly three digits), then an optional decimal part; or plain digits.
_NUMBER = (
    r"\d{1,3}(?:(?:[,.'\u00a0\u202f\u2009]| (?=\d{3}(?!\d)))\d{3})+(?:[.,]\d+)?(?!\d)"
    r"|\d+[.,]\d+(?![\d])|\d+"
)
_PATTERN = re.compile(
    "|".join(
        (
            r"(?P<url>(?:https?|ftp)://[^\s<>\"'«»“”]+|www\.[\w-]+(?:\.[\w-]+)+[^\s<>\"'«»“”]*)",
            r"(?P<email>[\w.+-]+@[\w-]+(?:\.[\w-]+)*\.[^\W\d_]{2,})",
            r"(?P<winpath>[A-Za-z]:\\[^\s\\<>\"|?*]+(?:\\[^\s\\<>\"|?*]+)*|\\\\[\w.$-]+(?:\\[^\s\\]+)+)",
            r"(?P<path>(?:~|\.{1,2})?/[\w.@+-]+(?:/[\w.@+-]+)+/?"
            r"|(?:~|\.{1,2})?/[\w@+-]+\.[\w]{1,8}"
            r"|[\w.@+-]+(?:/[\w.@+-]+)*/[\w@+-]+\.[^\W\d_]\w{0,7}"
            r"|[\w.@+-]+/[\w.@+-]+/[\w.@+-]+(?:/[\w.@+-]+)*/?)",
            r"(?P<uuid>[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})",
            r"(?P<date>\d{4}-\d{1,2}-\d{1,2}(?:[T ]\d{1,2}:\d{2}(?::\d{2})?(?:Z|[+-]\d{2}:?\d{2})?)?"
            r"|\d{1,2}[./-]\d{1,2}[./-](?:\d{4}|\d{2})(?!\d)"
            rf"|\d{{1,2}}\.?\s(?:{_MONTHS})\.?(?:,?\s\d{{4}}(?:\s?г\.)?)?(?![\w])"
            rf"|(?:{_MONTHS})\.?\s\d{{1,2}}(?:st|nd|rd|th)?(?:,?\s\d{{4}})?(?![\w])"
            rf"|(?:{_MONTHS})\s\d{{4}}(?![\w]))",
            r"(?P<time>\d{1,2}:\d{2}(?::\d{2})?(?:\s?[AaPp]\.?[Mm]\.?)?(?![\w:]))",
            rf"(?P<amount>[{_SYMBOLS}]\s?(?:{_NUMBER})"
            rf"|(?:{_NUMBER})\s?(?:[{_SYMBOLS}]|(?:{_CURRENCY_WORDS}|{_UNITS})(?![\w])))",
            r"(?P<identifier>(?=[\w.\-/#:]*\d)(?=[\w.\-/#:]*[^\W\d_])"
            r"[^\W_](?:[\w#]|[.\-/:](?=\w))+)",
            rf"(?P<number>{_NUMBER})",
        )
    )
)
_TRIGGER = re.compile("[0-9@/\\\\`«“„\"‘‹'" + _SYMBOLS + "]")
_QUOTES = "«“„\"‘‹'`"
# A quote mark or a backtick opens a clause only where a word may begin.
_QUOTE_PATTERN = re.compile(
    r"(?P<code>`[^`\n]{1,CODE_MAX}`)|(?P<quote>«[^»\n]{4,400}»|“[^”\n]{4,400}”|„[^“”\n]{4,400}[“”]"
    r"|\"[^\"\n]{4,400}\"|‘[^’\n]{4,400}’|‹[^›\n]{4,400}›|'[^'\n]{4,400}'(?!\w))".replace(
        "CODE_MAX", str(CODE_MAX_CHARS)
    )
)
_MONTH_BEFORE = re.compile(rf"(?:{_MONTHS})\.?\s$")
_SPACE = re.compile(r"\s+")
_WORD = re.compile(r"\w+")
# Characters a fact does not begin with, though its word does: brackets, emphasis, quotes.
_LEADING = "([{<*_|,;:!?«“„\"‘‹'`"
_TRAILING = ".,;:!?)]}>*_'\"»”’›…"
_OPENING_BRACKETS = {")": "(", "]": "[", "}": "{", ">": "<"}


@dataclass(frozen=True, slots=True)
class Found:
    """One hard fact in a text: its text exactly as written, its kind and where it starts."""

    text: str
    kind: FactKind
    start: int


def extract(text: str) -> list[Found]:
    """The hard facts of ``text``, in the order they appear (see the module docstring)."""
    found: list[Found] = []
    cursor = 0
    for trigger in _TRIGGER.finditer(text):
        at = trigger.start()
        if at < cursor:
            continue
        if text[at] in _QUOTES:
            hit = _clause(text, at)
        else:
            hit = _match(text, _word_start(text, cursor, at), at)
        if hit is None:
            continue
        fact, end = hit
        if fact is not None:
            found.append(fact)
        cursor = end
    return found


def _word_start(text: str, cursor: int, at: int) -> int:
    """Where the word holding ``at`` begins (after ``cursor``), leading brackets skipped;
    a month name just before a day is part of the date."""
    start = at
    while start > cursor and not text[start - 1].isspace():
        start -= 1
    while start < at and text[start] in _LEADING:
        start += 1
    if start == at and "0" <= text[at] <= "9":
        month = _MONTH_BEFORE.search(text, max(cursor, at - 12), at)
        if month is not None:
            return month.start()
    return start


def _match(text: str, start: int, at: int) -> tuple[Found | None, int] | None:
    """The fact starting at ``start`` (else at the trigger itself), and where the scan goes
    on; None: no fact there."""
    for begin in (start, at) if start != at else (at,):
        m = _PATTERN.match(text, begin)
        if m is None or m.end() <= at:
            continue
        kind = m.lastgroup
        assert kind is not None
        value = m.group()
        if kind in ("url", "path", "winpath", "identifier", "email"):
            value = _trim(value)
        return _checked(kind, value, begin), begin + max(1, len(value))
    return None


def _clause(text: str, at: int) -> tuple[Found | None, int] | None:
    """A code span or a quoted clause opening at ``at`` (a quote mark inside a word, such
    as an apostrophe, opens nothing)."""
    if at > 0 and text[at - 1].isalnum():
        return None
    m = _QUOTE_PATTERN.match(text, at)
    if m is None:
        return None
    kind = m.lastgroup
    assert kind is not None
    fact = _checked(kind, m.group(), at)
    if fact is None:
        return None  # not a clause: the facts inside are still looked for
    return fact, m.end()


def _checked(kind: str, value: str, start: int) -> Found | None:
    if kind == "quote":
        words = len(_WORD.findall(value))
        if not QUOTE_MIN_WORDS <= words <= QUOTE_MAX_WORDS:
            return None
        return Found(value, "quote", start)
    if kind == "winpath":
        return Found(value, "path", start)
    if kind == "uuid":
        return Found(value, "identifier", start)
    if kind == "identifier":
        return _identifier(value, start)
    if kind == "number":
        digits = sum(c.isdigit() for c in value)
        if digits < 3 and value.isdigit():
            return None
        return Found(value, "number", start)
    if kind == "path" and len(value) < 4:
        return None
    return Found(value, kind, start)  # type: ignore[arg-type]


def _identifier(value: str, start: int) -> Found | None:
    """Letters and digits mixed, at least four characters (``v2.3.1``, ``ORD-58213``)."""
    if len(value) < 4:
        return None
    if not any(c.isdigit() for c in value) or not any(c.isalpha() for c in value):
        return None
    return Found(value, "identifier", start)


def _trim(value: str) -> str:
    """A word's trailing punctuation is the sentence's, not the fact's (a closing bracket
    stays when the fact opened it)."""
    while value and value[-1] in _TRAILING:
        last = value[-1]
        opening = _OPENING_BRACKETS.get(last)
        if opening is not None and value.count(opening) >= value.count(last):
            break
        value = value[:-1]
    return value


# -- comparing a fact with a summary ----------------------------------------------------

_GROUP_SEPARATOR = re.compile(r"(?<=\d)[,.'\u00a0\u202f\u2009 ](?=\d{3}(?!\d))")


def normalise(text: str) -> str:
    """The form facts are compared in: spaces collapsed, lower case (hex digests and
    identifiers match whatever their case), thousands separators dropped."""
    text = _SPACE.sub(" ", text).strip().lower()
    return _GROUP_SEPARATOR.sub("", text)


def contains(haystack: str, fact: str) -> bool:
    """Whether the normalised ``haystack`` holds the normalised ``fact`` as a whole token
    (not ``500`` inside ``1500``)."""
    if not fact:
        return True
    at = haystack.find(fact)
    while at >= 0:
        before = haystack[at - 1] if at > 0 else " "
        end = at + len(fact)
        after = haystack[end] if end < len(haystack) else " "
        if not _joins(before, fact[0]) and not _joins(fact[-1], after):
            return True
        at = haystack.find(fact, at + 1)
    return False


def _joins(a: str, b: str) -> bool:
    """Two adjacent characters belong to one token (both letters/digits)."""
    return a.isalnum() and b.isalnum()
