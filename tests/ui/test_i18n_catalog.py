"""PROJ-4: every string of the interface is in the catalogs, translated into each language.

Three checks, no browser needed:

* the strings extracted the way ``make i18n`` extracts them (``babel.cfg``: Jinja2 templates,
  ``t("…")``/``tn("…", "…", n)`` in ``static/*.js``) are each in every ``.po``, translated;
* no visible text in a template is left outside ``{% trans %}``/``_()``: text nodes and the
  attributes a person reads or hears (``title``, ``aria-label``, ``placeholder``, ``alt``,
  ``label``);
* no string literal in a script looks like words for people (a capital and small letters, or
  words with spaces) unless it is the msgid of a ``t()``/``tn()`` call — so a ``textContent``,
  ``title`` or ``aria-label`` cannot be set from a bare English literal.

Each has a short, explicit allow-list: names and technical strings that are not words.
"""

from __future__ import annotations

import re
import warnings
from html.parser import HTMLParser
from pathlib import Path

import pytest
from babel.messages.catalog import Catalog
from babel.messages.extract import DEFAULT_KEYWORDS, extract_from_dir
from babel.messages.frontend import parse_mapping_cfg
from babel.messages.pofile import read_po

ROOT = Path(__file__).resolve().parents[2]
WEB = ROOT / "src" / "chatmem" / "web"
LOCALES = WEB / "locales"
TRANSLATED = ("ru", "it", "id")
KEYWORDS = {**DEFAULT_KEYWORDS, "t": None, "tn": (1, 2)}

#: Visible template text that is not a word to translate: the product's name, symbols.
TEMPLATE_ALLOWED = {
    "chatmem",
    "· chatmem",
    "https://api.openai.com/v1",
    # tokenizer and role names, as the API spells them
    "o200k_base",
    "cl100k_base",
    "system",
    "developer",
    "user",
}
#: Script literals that look like words but are not for people: header and key names,
#: the product's name, units of CSS.
SCRIPT_ALLOWED = {
    "Accept",
    "Content-Type",
    "X-CSRF-Token",
    "X-Chatmem-Conversation",
    "Last-Event-ID",
    "Idempotency-Key",
    "Enter",
    "Escape",
    "Tab",
    "ArrowUp",
    "ArrowDown",
    "ArrowLeft",
    "ArrowRight",
    "Home",
    "End",
    "Backspace",
    "chatmem",
    "use strict",
    # CSS classes passed around before they reach className
    "muted small",
    "muted small live-note",
    " recall",
    # the page title's tail and an HTTP status without a message
    " · chatmem",
    "HTTP ",
}


def _extracted() -> dict[str, tuple[str, ...]]:
    """msgid → (msgid,) or (singular, plural), with where each was found."""
    with (ROOT / "babel.cfg").open() as cfg:
        method_map, options_map = parse_mapping_cfg(cfg)
    found: dict[str, tuple[str, ...]] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        for _file, _line, message, _comments, _context in extract_from_dir(
            str(ROOT), method_map, options_map, keywords=KEYWORDS
        ):
            ids = (message,) if isinstance(message, str) else tuple(m for m in message if m)
            if ids and ids[0]:
                found[ids[0]] = ids
    return found


def _catalog(lang: str) -> Catalog:
    with (LOCALES / lang / "LC_MESSAGES" / "messages.po").open("rb") as handle:
        return read_po(handle, locale=lang)


def test_the_interface_has_strings_to_translate() -> None:
    found = _extracted()
    assert "Sign out" in found and "Conversation memory" in found
    assert any(len(ids) == 2 for ids in found.values()), "plurals are extracted (tn)"


@pytest.mark.parametrize("lang", TRANSLATED)
def test_every_string_is_translated(lang: str) -> None:
    catalog = _catalog(lang)
    problems = []
    for msgid, ids in sorted(_extracted().items()):
        message = catalog.get(ids if len(ids) == 2 else msgid)
        if message is None:
            problems.append(f"missing: {msgid!r}")
        elif message.fuzzy:
            problems.append(f"fuzzy: {msgid!r}")
        elif len(ids) == 2 and not (
            isinstance(message.string, tuple)
            and len(message.string) == catalog.num_plurals
            and all(message.string)
        ):
            problems.append(f"plural forms missing: {msgid!r}")
        elif not message.string:
            problems.append(f"untranslated: {msgid!r}")
    assert not problems, f"{lang}.po (run make i18n, then translate):\n" + "\n".join(problems)


@pytest.mark.parametrize("lang", TRANSLATED)
def test_translations_keep_their_placeholders(lang: str) -> None:
    """A translation names the same {placeholders} (JS) and %(names)s (templates)."""
    pattern = re.compile(r"\{\w+\}|%\(\w+\)s")
    bad = []
    for message in _catalog(lang):
        if not message.id or not message.string:
            continue
        ids = message.id if isinstance(message.id, tuple) else (message.id,)
        strings = message.string if isinstance(message.string, tuple) else (message.string,)
        wanted = set(pattern.findall(ids[-1])) | set(pattern.findall(ids[0]))
        for text in strings:
            # A singular form may leave out {n} ("одно сообщение"); nothing may be invented.
            if not set(pattern.findall(text)) <= wanted:
                bad.append(f"{ids[0]!r} → {text!r}")
    assert not bad, "\n".join(bad)


class _VisibleText(HTMLParser):
    """Text nodes and spoken attributes of a template whose Jinja parts are blanked out."""

    SPOKEN = ("title", "aria-label", "placeholder", "alt", "label")
    SILENT = ("script", "style", "svg", "code")

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.found: list[str] = []
        self._silent = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in self.SILENT:
            self._silent += 1
        for name, value in attrs:
            if name in self.SPOKEN and value:
                self.found.append(value)

    def handle_endtag(self, tag: str) -> None:
        if tag in self.SILENT and self._silent:
            self._silent -= 1

    def handle_data(self, data: str) -> None:
        if not self._silent:
            self.found.append(data)


def _untranslated_template_text(source: str) -> list[str]:
    source = re.sub(r"\{%-?\s*trans\b.*?\{%-?\s*endtrans\s*-?%\}", " ", source, flags=re.S)
    source = re.sub(r"\{\{.*?\}\}|\{%.*?%\}|\{#.*?#\}", " ", source, flags=re.S)
    parser = _VisibleText()
    parser.feed(source)
    out = []
    for text in parser.found:
        words = " ".join(text.split())
        if re.search(r"[^\W\d_]", words) and words not in TEMPLATE_ALLOWED:
            out.append(words)
    return out


def test_the_scanners_catch_bare_words() -> None:
    assert _untranslated_template_text('<p title="Hi">Hello {{ x }}</p>') == ["Hi", "Hello"]
    assert _untranslated_template_text("<p>{{ _('Hello') }} {% trans %}Hi{% endtrans %}</p>") == []
    js = 'x.textContent = "Compress now"; y.title = t("Close"); el("span", {class: "a b"});'
    assert _untranslated_script_literals(js) == ["Compress now"]
    js = 'x.textContent = n + " tokens"; y.textContent = "used: " + n + " of " + m;'
    assert _untranslated_script_literals(js) == [" tokens", "used: ", " of "]


@pytest.mark.parametrize(
    "template", sorted((WEB / "templates").glob("*.html")), ids=lambda path: path.name
)
def test_no_template_text_is_left_untranslated(template: Path) -> None:
    assert _untranslated_template_text(template.read_text(encoding="utf-8")) == []


#: A literal right after these is a CSS class, a selector, an event, an element or a URL.
_TECHNICAL_BEFORE = re.compile(
    r"(^|\.)(className|class|classList\.(add|remove|toggle|contains)|querySelector(All)?|"
    r"closest|matches|getElementById|addEventListener|removeEventListener|createElement|el|"
    r"setAttribute|getAttribute|removeAttribute|toggleAttribute|hasAttribute|dataset|"
    r"dispatchEvent|CustomEvent|Event|api|fetch|assign|replace|open|console\.\w+)$"
)


def _untranslated_script_literals(source: str) -> list[str]:
    from babel.messages import jslexer

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        tokens = [
            tok
            for tok in jslexer.tokenize(source, jsx=False, template_string=True)
            if tok.type not in ("linecomment", "multilinecomment")
        ]
    out = []
    for i, tok in enumerate(tokens):
        if tok.type not in ("string", "template_string"):
            continue
        prev = [tokens[j].value for j in range(max(0, i - 4), i)]
        # t("…"), tn("…", "…"): the msgids.
        if prev[-2:] == ["t", "("] or prev[-2:] == ["tn", "("]:
            continue
        if len(prev) >= 4 and prev[-4:-2] == ["tn", "("] and prev[-1] == ",":
            continue
        # el("span", {class: "…"}), x.classList.add("…"), ….querySelector("…"), api("GET", …)
        if (
            prev[-2:-1]
            and prev[-1] in ("(", ",", ":", "=", "+=")
            and _TECHNICAL_BEFORE.search(prev[-2])
        ):
            continue
        if len(prev) >= 4 and prev[-1] == "," and _TECHNICAL_BEFORE.search(prev[-4]):
            continue
        text = tok.value[1:-1]
        if (
            text in SCRIPT_ALLOWED
            or text.startswith(("/", "#", ".", "["))
            or "<" in text
            or "class=" in text
        ):
            continue
        wordy = (
            re.search(r"[^\W\d_]{2,}\s+[^\W\d_]{2,}", text)  # words with spaces
            or re.match(r"[A-Z][a-z]+", text)  # a capitalised word
            or re.fullmatch(r"\W*\s[^\W\d_]{2,}\W*|\W*[^\W\d_]{2,}:?\s", text)  # " tokens", "of "
        )
        if wordy:
            out.append(text)
    return out


@pytest.mark.parametrize(
    "script",
    sorted(p for p in (WEB / "static").glob("*.js") if p.name != "i18n.js"),
    ids=lambda path: path.name,
)
def test_no_script_string_for_people_is_left_untranslated(script: Path) -> None:
    assert _untranslated_script_literals(script.read_text(encoding="utf-8")) == []
