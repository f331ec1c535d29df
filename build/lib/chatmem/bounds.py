"""Input bounds (SEC-1): every JSON body and import file is bounded before it is parsed.

A JSON parser's memory is not bounded by its input's size alone: ijson builds a prefix string
per nesting level (memory grows with the square of the depth — 400 KB of ``[`` took a server
to 21 GB), and a single string or conversation can be as large as the whole upload.  So bytes
pass a cheap structural scan *before* any parser sees them:

* :class:`JsonScanner` follows the bytes as they arrive, chunk by chunk, and refuses a nesting
  deeper than ``max_depth``, a string longer than ``max_string_bytes`` (as sent, escapes
  included) and — for imports — one conversation larger than ``max_item_bytes``.  It tracks
  only a depth counter and whether it is inside a string.  A chunk is first *skimmed* with a
  few whole-chunk byte operations (escaped quotes masked, the chunk split at its quotes, the
  brackets outside strings counted into a depth profile), so Python code runs per chunk, not
  per bracket (issue 16: the scan had cost more than parsing the file); any chunk where a
  bound is near (or that holds what only the exact scan handles: a top-level object's keys,
  bytes no valid JSON has) is scanned exactly, one regular expression per span between two
  brackets.  It can also report the keys of the top-level object (the import's own format
  refuses unknown ones without building the document).
* :func:`loads` parses a request body that passed the scan and checks the value: strings
  valid Unicode without NUL (no lone surrogate, no ``\\u0000`` — PostgreSQL cannot store NUL
  and SQLite cannot encode a surrogate, so both backends refuse alike), at most ``max_items``
  elements in an array or object, numbers finite (``1e999`` is not Infinity) and whole numbers
  within a signed 64-bit range (what both databases can store and compare).

Every refusal is :class:`~chatmem.errors.InvalidInput` naming what and where (the CONTRACT's
``invalid_input``); nothing has been parsed, let alone written, when it is raised.
"""

from __future__ import annotations

import json
import math
import re
from bisect import bisect_right
from collections.abc import Callable
from dataclasses import dataclass
from itertools import accumulate, count
from operator import sub
from typing import Any

from chatmem.errors import InvalidInput

#: The largest whole number accepted anywhere (both databases store and compare 64 bits).
MAX_INT = 2**63 - 1

DEFAULT_MAX_DEPTH = 64
DEFAULT_MAX_STRING_BYTES = 32 * 1024 * 1024
DEFAULT_MAX_ITEMS = 100_000
DEFAULT_MAX_ITEM_BYTES = 256 * 1024 * 1024

# Everything up to the next bracket: runs of plain bytes and whole strings.  Every byte has
# exactly one way to match, so the greedy star never backtracks, and the match cannot fail —
# it stops at a bracket, at the opening quote of a string that does not end in this chunk, or
# at the chunk's end.
_SPAN = re.compile(rb'(?:[^"\[\]{}]++|"[^"\\]*+(?:\\.[^"\\]*+)*+")*+', re.DOTALL)
_STRING = re.compile(rb'"[^"\\]*+(?:\\.[^"\\]*+)*+"', re.DOTALL)
# The rest of a string that began in an earlier chunk: up to its closing quote, or as far as
# this chunk goes (stopping before a trailing backslash whose escaped byte comes next).
_STRING_REST = re.compile(rb'[^"\\]*+(?:\\.[^"\\]*+)*+"', re.DOTALL)
_STRING_PART = re.compile(rb'[^"\\]*+(?:\\.[^"\\]*+)*+', re.DOTALL)
# The top object's kept bytes read token by token from the start — a whole string (a key
# when a colon follows) or a run of other bytes — so a search never starts inside a string.
_TOP_TOKEN = re.compile(rb'("[^"\\]*+(?:\\.[^"\\]*+)*+")(\s*+:)?|[^"]++', re.DOTALL)
_OPEN = frozenset(b"[{")
_TOP_BUFFER = 64 * 1024
_QUOTE = ord('"')
_NUL_ESCAPE = b"\\u0000"
# The skim's tables: escapes masked by bytes of the same length (NUL, which no valid JSON
# holds outside a string — such a chunk is scanned exactly); every byte but a bracket
# deleted; an opening bracket as a step of 2 and a closing one as 0 (the depth after bracket
# ``i`` is the running sum minus ``i + 1``); every bracket as \x01 (any \x01 as \x02).
_ESCAPED_BACKSLASH = b"\\\\"
_ESCAPED_QUOTE = b'\\"'
_MASK = b"\0\0"
_BRACKETS = b"[]{}"
_NOT_BRACKETS = bytes(byte for byte in range(256) if byte not in _BRACKETS)
_STEPS = bytes(2 if byte in b"[{" else 0 for byte in range(256))
_MARKED = bytes(1 if byte in _BRACKETS else 2 if byte == 1 else byte for byte in range(256))
# The skim holds a piece per string of what it reads: it reads at most this much at a time,
# and leaves to the exact scan a chunk denser in quotes than one per this many bytes (little
# but one-letter keys and values; a piece object costs more than the bytes it holds: at
# this density a 64 KiB chunk takes about 0.7 MB while it is skimmed).  A real ChatGPT
# export, metadata and short messages included, has one quote per 7 to 10 bytes.
_SKIM_BYTES = 64 * 1024
_SKIM_BYTES_PER_QUOTE = 6
_BAD_TEXT = re.compile("[\x00\ud800-\udfff]")


@dataclass(frozen=True)
class Bounds:
    """The limits, from settings (``CHATMEM_MAX_JSON_DEPTH`` …) or the defaults."""

    max_depth: int = DEFAULT_MAX_DEPTH
    max_string_bytes: int = DEFAULT_MAX_STRING_BYTES
    max_items: int = DEFAULT_MAX_ITEMS
    max_item_bytes: int = DEFAULT_MAX_ITEM_BYTES

    @classmethod
    def from_settings(cls, settings: Any) -> Bounds:
        return cls(
            max_depth=settings.max_json_depth,
            max_string_bytes=settings.max_string_bytes,
            max_items=settings.max_json_items,
            max_item_bytes=settings.max_import_conversation_bytes,
        )


def _size(n: int) -> str:
    if n >= 1024 * 1024:
        return f"{n / (1024 * 1024):.4g} MB"
    if n >= 1024:
        return f"{n / 1024:.4g} KB"
    return f"{n} bytes"


class JsonScanner:
    """A streaming structural check of JSON bytes; :meth:`feed` each chunk in order.

    ``item_depth``: the nesting level of the items whose size ``max_item_bytes`` bounds (2 for
    the conversations of a top-level list, 3 for ``{"conversations": [...]}``); ``None``
    bounds no item.  ``on_top_key`` is called with each key of a top-level object.  The
    scanner trusts nothing about validity — the parser after it still refuses broken JSON —
    but whatever passes it is bounded in depth, string length and item size."""

    def __init__(
        self,
        bounds: Bounds,
        *,
        item_depth: int | None = None,
        on_top_key: Callable[[str], None] | None = None,
    ) -> None:
        self.bounds = bounds
        self.item_depth = item_depth
        self.on_top_key = on_top_key
        self.depth = 0
        self.offset = 0  # bytes fed so far
        self._in_string = False
        self._string_bytes = 0
        self._escaped = False  # in a string, the previous chunk ended with a backslash
        self._item_start: int | None = None
        self._top_is_object = False
        self._top = bytearray()
        #: A ``\u0000`` escape went by (perhaps as literal text): strings may hold NUL.
        self.saw_nul = False
        self._tail = b""

    # -- refusals ------------------------------------------------------------------------

    def _too_deep(self) -> InvalidInput:
        return InvalidInput(
            f"The JSON nests deeper than {self.bounds.max_depth} levels "
            f"(after {self.offset:,} bytes); this server reads at most that."
        )

    def _too_long(self) -> InvalidInput:
        return InvalidInput(
            f"A JSON string is longer than {_size(self.bounds.max_string_bytes)} "
            f"(after {self.offset:,} bytes); this server reads at most that."
        )

    def _check_item(self, position: int) -> None:
        if (
            self._item_start is not None
            and position - self._item_start > self.bounds.max_item_bytes
        ):
            raise InvalidInput(
                f"One conversation is larger than {_size(self.bounds.max_item_bytes)} "
                f"(after {position:,} bytes); this server imports at most that."
            )

    # -- the scan -------------------------------------------------------------------------

    def feed(self, chunk: bytes) -> None:
        if len(chunk) > _SKIM_BYTES:  # a whole body: in slices (the result is the same)
            for start in range(0, len(chunk), _SKIM_BYTES):
                self.feed(chunk[start : start + _SKIM_BYTES])
            return
        if not self.saw_nul:
            # The escape may be cut across several small chunks: the last five bytes seen so
            # far (whatever chunks they came in) are kept to be read with the next one.
            self.saw_nul = _NUL_ESCAPE in chunk or _NUL_ESCAPE in self._tail + chunk[:5]
            self._tail = (self._tail + chunk[-5:])[-5:]
        base = self.offset
        end = len(chunk)
        pos = 0
        skimmed = False
        while pos < end:
            if self._in_string:
                stop = self._finish_string(chunk, pos)
                self._keep_top(chunk, pos, stop)
                pos = stop
                continue
            if not skimmed:  # once per chunk, outside a string: most of it in one go
                skimmed = True
                pos = self._skim(chunk, pos, base)
                continue
            match = _SPAN.match(chunk, pos)
            assert match is not None  # the pattern matches the empty string
            stop = match.end()
            if stop - pos > self.bounds.max_string_bytes:
                self._check_strings(chunk, pos, stop)
            self._keep_top(chunk, pos, stop)
            if stop == end:
                break
            byte = chunk[stop]
            if byte == _QUOTE:  # a string that goes on in the next chunk
                self._in_string = True
                self._string_bytes = 0
                self._escaped = False
                self._keep_top(chunk, stop, stop + 1)
                pos = stop + 1
                continue
            if self.depth == 1 and self._top:
                self._report_top_keys(final=True)
            if byte in _OPEN:
                self.depth += 1
                if self.depth > self.bounds.max_depth:
                    self.offset = base + stop
                    raise self._too_deep()
                if self.depth == 1:
                    self._top_is_object = byte == ord("{")
                if self.depth == self.item_depth:
                    self._item_start = base + stop
            else:
                if self.depth == self.item_depth:
                    self._check_item(base + stop)
                    self._item_start = None
                self.depth = max(0, self.depth - 1)
            self._check_item(base + stop)
            pos = stop + 1
        self.offset = base + end
        self._check_item(self.offset)
        if len(self._top) > _TOP_BUFFER:
            self._report_top_keys(final=False)

    def _skim(self, chunk: bytes, pos: int, base: int) -> int:
        """The chunk from ``pos`` (outside a string) up to the string it ends in, if any,
        followed with whole-chunk byte operations rather than a step per bracket; returns
        where the exact scan takes over (``pos`` itself when this part needs it: a bound
        that could be reached here, a top-level object's bytes, or bytes no valid JSON has
        outside a string).  Nothing changes unless the whole part passed."""
        bounds = self.bounds
        if self.item_depth is not None and len(chunk) - pos > bounds.max_item_bytes:
            return pos  # an item's size is only known here to within the chunk
        part = chunk[pos:] if pos else chunk
        if part.count(b'"') * _SKIM_BYTES_PER_QUOTE > len(part):
            return pos  # mostly keys and short values: a piece per string costs too much
        if b"\\" in part:  # escapes masked, same length: every quote left delimits a string
            part = part.replace(_ESCAPED_BACKSLASH, _MASK).replace(_ESCAPED_QUOTE, _MASK)
        pieces = part.split(b'"')  # outside, string, outside, string, …
        stop = pos + len(part)
        if len(pieces) % 2 == 0:  # the chunk ends in a string: the exact scan follows it
            stop -= len(pieces.pop()) + 1
        outside = b"".join(pieces[0::2])
        if b"\\" in outside or b"\0" in outside:
            return pos  # a backslash or NUL outside a string: not JSON, scanned exactly
        if len(part) > bounds.max_string_bytes and (
            max(map(len, pieces[1::2]), default=0) > bounds.max_string_bytes
        ):
            return pos
        brackets = outside.translate(None, _NOT_BRACKETS)
        try:
            # The depth before the first bracket and after each one.
            depths = bytes(
                map(sub, accumulate(brackets.translate(_STEPS), initial=self.depth), count())
            )
        except ValueError:  # below 0 (stray closers: clamped exactly) or past 255
            return pos
        if max(depths) > bounds.max_depth:
            return pos  # refused by the exact scan, with its offset
        if self.on_top_key is not None and min(depths) <= 1:
            return pos  # a top-level object's own bytes: its keys are read exactly
        if self.item_depth is not None:
            if self._item_start is not None and base + len(chunk) - self._item_start > (
                bounds.max_item_bytes
            ):
                return pos  # the open item may reach its bound in this chunk
            inner = self.item_depth
            opened = depths.rfind(bytes([inner - 1, inner])) if inner > 0 else -1
            closed = depths.rfind(bytes([inner, inner - 1])) if inner > 0 else -1
            if opened > closed:  # an item is still open: where its bracket is
                self._item_start = base + pos + self._bracket_at(pieces, outside, opened)
            elif closed >= 0:
                self._item_start = None
        self.depth = depths[-1]
        return stop

    @staticmethod
    def _bracket_at(pieces: list[bytes], outside: bytes, index: int) -> int:
        """The position in ``pieces`` joined with quotes of the ``index``-th bracket outside
        strings (``outside``: the outside pieces joined)."""
        before = outside.translate(_MARKED).split(b"\x01", index + 1)
        at = sum(map(len, before[: index + 1])) + index  # in ``outside``
        ends = list(accumulate(map(len, pieces[0::2])))
        k = bisect_right(ends, at)  # the outside piece holding it: after k strings
        return at + sum(map(len, pieces[1 : 2 * k : 2])) + 2 * k

    def _keep_top(self, chunk: bytes, start: int, stop: int) -> None:
        """Bytes of the top-level object itself (keys and scalar values, not nested values)
        are kept until the next bracket, so a key split across chunks is still seen."""
        if self.depth == 1 and self._top_is_object and self.on_top_key is not None:
            self._top += chunk[start:stop]

    def _report_top_keys(self, *, final: bool) -> None:
        assert self.on_top_key is not None
        kept = 0
        for match in _TOP_TOKEN.finditer(self._top):
            if match.group(2) is None:
                continue  # a value, or bytes between tokens
            kept = match.end()
            try:
                key = json.loads(match.group(1))
            except (ValueError, UnicodeDecodeError):
                continue  # broken JSON: the parser reports it
            self.on_top_key(key)
        # Before a bracket everything is complete; otherwise a key may still be arriving.
        self._top = bytearray() if final else self._top[kept:]

    def _finish_string(self, chunk: bytes, pos: int) -> int:
        """Inside a string from ``pos``: the position after its closing quote, or the chunk's
        end (the string goes on).  Only reached for strings that cross a chunk boundary."""
        start = pos
        if self._escaped and pos < len(chunk):  # the previous chunk ended with a backslash
            pos += 1
            self._escaped = False
        done = _STRING_REST.match(chunk, pos)
        if done is not None:
            self._grow_string(done.end() - 1 - start)
            self._in_string = False
            return done.end()
        part = _STRING_PART.match(chunk, pos)
        assert part is not None  # matches the empty string
        self._escaped = part.end() < len(chunk)  # stopped at a trailing backslash
        self._grow_string(len(chunk) - start)
        return len(chunk)

    def _grow_string(self, n: int) -> None:
        self._string_bytes += n
        if self._string_bytes > self.bounds.max_string_bytes:
            raise self._too_long()

    def _check_strings(self, chunk: bytes, start: int, stop: int) -> None:
        limit = self.bounds.max_string_bytes + 2  # the quotes
        for match in _STRING.finditer(chunk, start, stop):
            if match.end() - match.start() > limit:
                raise self._too_long()


def scan(data: bytes, bounds: Bounds) -> None:
    """The structural check of a whole body (see :class:`JsonScanner`)."""
    JsonScanner(bounds).feed(data)


# -- parsed values ---------------------------------------------------------------------------


def _constant(name: str) -> float:
    return math.nan  # NaN, Infinity, -Infinity: refused by check_value, with the field named


def _bounded_int(text: str) -> int:
    # Past 19 digits it is out of range anyway; converting thousands of digits costs time.
    return int(text) if len(text) <= 20 else MAX_INT + 1


def loads(data: bytes | str, bounds: Bounds = Bounds()) -> Any:
    """A bounded ``json.loads``: the structural scan first, then the parse, then
    :func:`check_value`.  Broken JSON raises ``json.JSONDecodeError`` (or
    ``UnicodeDecodeError``) as ``json.loads`` would; bounds raise InvalidInput."""
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
    scan(raw, bounds)
    value = json.loads(data, parse_constant=_constant, parse_int=_bounded_int)
    check_value(value, bounds)
    return value


def check_value(value: Any, bounds: Bounds = Bounds(), where: str = "") -> None:
    """Refuse text that is not valid Unicode or holds NUL, too many items, non-finite numbers
    and whole numbers beyond 64 bits, anywhere in ``value``; the message names the field."""
    stack: list[tuple[Any, str, int]] = [(value, where, 0)]
    while stack:
        item, path, depth = stack.pop()
        if isinstance(item, str):
            _check_text(item, path)
        elif isinstance(item, bool) or item is None:
            continue
        elif isinstance(item, int):
            if not -MAX_INT - 1 <= item <= MAX_INT:
                raise InvalidInput(
                    f"{path or 'body'}: the number is out of range (whole numbers fit in 64 bits)"
                )
        elif isinstance(item, float):
            if not math.isfinite(item):
                raise InvalidInput(f"{path or 'body'}: numbers must be finite (1e999 is not)")
        elif isinstance(item, dict):
            if len(item) > bounds.max_items:
                raise InvalidInput(
                    f"{path or 'body'}: more than {bounds.max_items:,} members in one object"
                )
            if depth >= bounds.max_depth:
                raise InvalidInput(f"{path or 'body'}: nested deeper than {bounds.max_depth}")
            for key, child in item.items():
                _check_text(key, f"{path}.{key}" if path else str(key), key=True)
                stack.append((child, f"{path}.{key}" if path else str(key), depth + 1))
        elif isinstance(item, list):
            if len(item) > bounds.max_items:
                raise InvalidInput(
                    f"{path or 'body'}: more than {bounds.max_items:,} items in one list"
                )
            if depth >= bounds.max_depth:
                raise InvalidInput(f"{path or 'body'}: nested deeper than {bounds.max_depth}")
            stack.extend((child, f"{path}[{i}]", depth + 1) for i, child in enumerate(item))


def _check_text(text: str, path: str, *, key: bool = False) -> None:
    if text.isascii() and "\x00" not in text:
        return
    bad = _BAD_TEXT.search(text)
    if bad is None:
        return
    what = "a key" if key else (path or "body")
    if bad.group() == "\x00":
        raise InvalidInput(f"{_short(what)}: text must not contain NUL (\\u0000)")
    raise InvalidInput(
        f"{_short(what)}: text must be valid Unicode (a lone surrogate such as "
        f"\\u{ord(bad.group()):04x} is not)"
    )


def _short(text: str) -> str:
    return text if len(text) <= 80 else text[:77] + "…"


def clean_value(value: Any) -> Any:
    """``value`` with :func:`clean_text` applied to every string in it, keys included."""
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, dict):
        return {clean_text(k): clean_value(v) for k, v in value.items()}
    if isinstance(value, list):
        return [clean_value(v) for v in value]
    return value


def clean_text(text: str) -> str:
    """What import does instead of refusing (foreign exports do carry these): NUL and lone
    surrogates become U+FFFD, the same on every backend."""
    if text.isascii() and "\x00" not in text:
        return text
    return _BAD_TEXT.sub("\ufffd", text)
