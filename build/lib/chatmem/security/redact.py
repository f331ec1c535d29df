"""Scrubbing provider text before it is stored, logged or shown (SEC-4, PROF-2).

Providers echo what they were sent: the whole key ("Incorrect API key provided: sk-…"), or a
masked form of it — OpenAI's ``sk-proj-****…abcd``, ``sk-LEAK...567890``, ``sk-…abcd``,
``sk-abc***xyz``.  Each of those fragments narrows a guess, and on a shared profile every user
would see a piece of the administrator's key.  :class:`KeyScrubber` removes from a text:

- every run of 4 or more characters that is a prefix or a suffix of the key, and every run of
  :data:`MIN_INNER_RUN` or more characters found anywhere inside it;
- every masked form: a word holding a mask (``...``, ``…``, ``**``, ``•``) whose part before
  the mask starts the key or whose part after it ends the key (2 characters are enough there,
  as in ``sk-abc***xyz``, since the mask says what the word is);
- the key echoed in another form — upper- or lower-case, spaced out, reversed, in hex, in
  base64 (standard or URL-safe, at any alignment: ``Basic`` auth encodes ``user:key``): every
  run of :data:`MIN_INNER_RUN` or more characters of one of those forms, found in the text
  read without whitespace and case (issue 25).  The forms are derived once per key
  (:class:`KeyScrubber`).

:func:`scrub_provider_text` adds the endpoint, for users who may not see it (a shared profile
used by somebody else: its URL and host name are the owner's business), and bounds the length.
"""

from __future__ import annotations

import base64
import re

#: What stands where a fragment of a secret was.
REDACTED = "***"
#: Shortest prefix or suffix run of the key that is scrubbed.
MIN_RUN = 4
#: Shortest run from the middle of the key that is scrubbed.
MIN_INNER_RUN = 8
#: Shortest key part beside a mask that marks a masked key.
MIN_MASKED_PART = 2
#: Provider text is cut to this many characters before it is scrubbed (bounded work), and
#: the scrubbed text to :data:`MAX_MESSAGE` (what a person reads).
MAX_SCAN = 4000
MAX_MESSAGE = 500

# A bounded word on either side of the mask keeps the search linear in the text.
_WORD = r"[A-Za-z0-9_\-]{0,256}"
_MASK = r"(?:\.{2,}|…+|\*{2,}|•+)"
_MASKED = re.compile(rf"({_WORD}){_MASK}({_WORD})")


def _spans_of(text: str, secret: str) -> list[tuple[int, int]]:
    spans: list[tuple[int, int]] = []
    size = len(secret)
    if size < MIN_RUN:
        start = text.find(secret)
        while start != -1:
            spans.append((start, start + size))
            start = text.find(secret, start + 1)
        return spans
    # Prefix runs: start with the key's first MIN_RUN characters, extend forward.
    head = secret[:MIN_RUN]
    at = text.find(head)
    while at != -1:
        end = at + MIN_RUN
        while end < len(text) and end - at < size and text[end] == secret[end - at]:
            end += 1
        spans.append((at, end))
        at = text.find(head, at + 1)
    # Suffix runs: end with the key's last MIN_RUN characters, extend backward.
    tail = secret[-MIN_RUN:]
    at = text.find(tail)
    while at != -1:
        start, end = at, at + MIN_RUN
        while (
            start > 0 and end - start < size and text[start - 1] == secret[size - (end - start) - 1]
        ):
            start -= 1
        spans.append((start, end))
        at = text.find(tail, at + 1)
    # Runs from the middle: every window of MIN_INNER_RUN characters (overlapping windows
    # merge into the whole run).
    seen: set[str] = set()
    for i in range(0, size - MIN_INNER_RUN + 1):
        window = secret[i : i + MIN_INNER_RUN]
        if window in seen:
            continue
        seen.add(window)
        at = text.find(window)
        while at != -1:
            spans.append((at, at + MIN_INNER_RUN))
            at = text.find(window, at + 1)
    return spans


def _replace_spans(text: str, spans: list[tuple[int, int]]) -> str:
    if not spans:
        return text
    spans.sort()
    out: list[str] = []
    cursor = 0
    current_start, current_end = spans[0]
    for start, end in spans[1:]:
        if start <= current_end:
            current_end = max(current_end, end)
            continue
        out += [text[cursor:current_start], REDACTED]
        cursor = current_end
        current_start, current_end = start, end
    out += [text[cursor:current_start], REDACTED, text[current_end:]]
    return "".join(out)


def _is_masked_key(head: str, tail: str, secret: str) -> bool:
    return (len(head) >= MIN_MASKED_PART and secret.startswith(head)) or (
        len(tail) >= MIN_MASKED_PART and secret.endswith(tail)
    )


# ASCII letters only, so a text and its lower-cased view keep the same length.
_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def _base64_runs(raw: bytes) -> list[str]:
    """The parts of ``raw``'s base64 that stay the same wherever ``raw`` sits in a longer
    encoded text: for each of the three alignments, the characters made of ``raw``'s bits
    alone (not those shared with a neighbouring byte), in both alphabets."""
    runs = []
    for shift in range(3):
        encoded = base64.b64encode(bytes(shift) + raw).decode().rstrip("=")
        start = -(-shift * 8 // 6)  # characters holding a bit of the bytes before
        end = len(encoded) - (1 if (shift + len(raw)) * 8 % 6 else 0)  # or of those after
        runs += [encoded[start:end], encoded[start:end].translate(str.maketrans("+/", "-_"))]
    return runs


def _echoed_forms(secret: str) -> tuple[str, ...]:
    """The forms of ``secret`` a provider might echo besides the key itself, as they read in
    the normalised text (:func:`_normalised`)."""
    raw = secret.encode()
    forms = {secret, secret[::-1], raw.hex(), *_base64_runs(raw)}
    normalised = {_normalised(form)[0] for form in forms}
    return tuple(sorted(form for form in normalised if form))


def _normalised(text: str) -> tuple[str, list[int]]:
    """``text`` without whitespace, its ASCII letters lower-cased, and where each character
    of that view stands in ``text``."""
    where = [i for i, char in enumerate(text) if not char.isspace()]
    view = "".join(text[i] for i in where).translate(_ASCII_LOWER)
    return view, where


def _form_spans(text: str, forms: tuple[str, ...]) -> list[tuple[int, int]]:
    """Where in ``text`` a run of :data:`MIN_INNER_RUN` characters of one of ``forms`` (or a
    shorter form whole) stands, read without whitespace and case."""
    view, where = _normalised(text)
    spans = []
    for form in forms:
        size = min(MIN_INNER_RUN, len(form))
        for window in {form[i : i + size] for i in range(len(form) - size + 1)}:
            at = view.find(window)
            while at != -1:
                spans.append((where[at], where[at + size - 1] + 1))
                at = view.find(window, at + 1)
    return spans


class KeyScrubber:
    """Removes one API key from texts (see the module): its forms are derived once, here."""

    def __init__(self, secret: str) -> None:
        self.secret = secret
        self._forms = _echoed_forms(secret)

    def _masked(self, match: re.Match[str]) -> str:
        head, tail = match.group(1), match.group(2)
        return REDACTED if _is_masked_key(head, tail, self.secret) else match.group(0)

    def scrub(self, text: str) -> str:
        if not text:
            return text
        text = _MASKED.sub(self._masked, text)
        return _replace_spans(text, _spans_of(text, self.secret) + _form_spans(text, self._forms))


def scrub_provider_text(
    text: str,
    key: KeyScrubber | None,
    *,
    conceal_url: str | None = None,
    host: str | None = None,
) -> str:
    """Provider text ready to be stored, logged and shown: bounded, without the key or a
    fragment of it, and — for a user who may not see the endpoint — without its URL or host.
    ``key``: the client's :class:`KeyScrubber` (its key's forms derived once), or None."""
    text = text[:MAX_SCAN]
    if key is not None:
        text = key.scrub(text)
    if conceal_url:
        for part in sorted(
            {conceal_url, conceal_url.rstrip("/"), *([host] if host else [])}, key=len, reverse=True
        ):
            if part:
                text = re.sub(re.escape(part), "the model API", text, flags=re.IGNORECASE)
    return text[:MAX_MESSAGE]
