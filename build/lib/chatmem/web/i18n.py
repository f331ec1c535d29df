"""The interface's four languages (PROJ-4): English, Russian, Italian, Indonesian.

Every visible string is an English message id in a gettext catalog, ``locales/<lang>/
LC_MESSAGES/messages.po`` (``locales/messages.pot`` is what ``make i18n`` extracts from the
templates and ``static/*.js``).  The ``.po`` files are the only source: they are read with
Babel when the app first needs them and compiled in memory, so nothing has to be compiled
by hand before a release and a wheel ships exactly the ``.po`` files.  English is the message
ids themselves; a string missing from a catalog falls back to English (a test forbids that).

One catalog serves both sides:

* the server renders templates through Jinja2's i18n extension (``{% trans %}``, ``_()``),
  with :class:`Language` as the page's language;
* the page carries the same catalog as JSON (:meth:`Language.js_catalog`) for
  ``static/i18n.js``, whose ``t()``/``tn()`` look strings up the same way.  A plural is sent
  as its forms keyed by CLDR category (``one``/``few``/``many``/``other``) so the browser
  picks one with ``Intl.PluralRules`` — the ``.po``'s ``Plural-Forms`` expression is C
  code that a page under a strict CSP cannot evaluate.

The language of a request (:func:`choose`): the user's own setting if they chose one
(``users.locale``), else the best match of the browser's ``Accept-Language``, else English.
Numbers follow the language: Babel here, ``Intl.NumberFormat`` in the browser; token counts
are compact ("45K", "45 тыс.", "45 rb") as the original Russian page writes them
("45 тыс. / 1 млн").
"""

from __future__ import annotations

import functools
import io
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from gettext import GNUTranslations, NullTranslations
from pathlib import Path
from typing import Any

from babel import Locale
from babel.messages.mofile import write_mo
from babel.messages.pofile import read_po
from babel.numbers import format_compact_decimal, format_decimal
from markupsafe import Markup

#: The interface's languages, English first (the default and the message ids).
LOCALES: tuple[str, ...] = ("en", "ru", "it", "id")
DEFAULT_LOCALE = "en"
#: Each language's own name, for the language picker.
LANGUAGE_NAMES: Mapping[str, str] = {
    "en": "English",
    "ru": "Русский",
    "it": "Italiano",
    "id": "Bahasa Indonesia",
}
LOCALES_DIR = Path(__file__).resolve().parent / "locales"
#: Old or alternative tags a browser may send for one of ours ("in" is Indonesian's old code).
_ALIASES: Mapping[str, str] = {"in": "id"}
#: Longest Accept-Language header looked at (a browser sends a few dozen bytes).
_MAX_ACCEPT = 1024

#: Sample numbers to learn which gettext plural index each CLDR category uses.
_PLURAL_SAMPLES = (*range(0, 200), 1000, 1001, 100000, 1000000, 1000001)


def _read_catalog(locale: str) -> tuple[NullTranslations, dict[str, Any]]:
    """The compiled translations and the browser's catalog of one language."""
    path = LOCALES_DIR / locale / "LC_MESSAGES" / "messages.po"
    if locale == DEFAULT_LOCALE or not path.exists():
        return NullTranslations(), {}
    with path.open("rb") as handle:
        catalog = read_po(handle, locale=locale)
    compiled = io.BytesIO()
    write_mo(compiled, catalog, use_fuzzy=False)
    compiled.seek(0)
    translations = GNUTranslations(compiled)
    categories = _plural_categories(locale, translations)
    browser: dict[str, Any] = {}
    for message in catalog:
        if not message.id or message.fuzzy or message.context:
            continue  # the scripts' t() has no contexts: a msgctxt is the templates' own
        if isinstance(message.id, (tuple, list)):
            forms = [str(form) for form in message.string or ()]
            if forms and all(forms):
                browser[str(message.id[0])] = {
                    category: forms[index]
                    for category, index in categories.items()
                    if index < len(forms)
                }
        elif message.string:
            browser[message.id] = message.string
    return translations, browser


def _plural_categories(locale: str, translations: GNUTranslations) -> dict[str, int]:
    """Which form of a gettext plural each CLDR category of ``locale`` means, found by
    asking both rules about the same numbers (``plural_form`` is CLDR's, ``ngettext`` the
    catalog's ``Plural-Forms``)."""
    cldr = Locale.parse(locale).plural_form
    plural = translations.plural  # type: ignore[attr-defined]  # set by GNUTranslations._parse
    out: dict[str, int] = {}
    for n in _PLURAL_SAMPLES:
        out.setdefault(cldr(n), int(plural(n)))
    out.setdefault("other", max(out.values(), default=0))
    return out


@dataclass(frozen=True)
class Language:
    """One interface language: its gettext functions, number formats and browser catalog."""

    code: str
    translations: NullTranslations = field(repr=False, compare=False)
    browser_catalog: Mapping[str, Any] = field(repr=False, compare=False)

    @property
    def name(self) -> str:
        return LANGUAGE_NAMES[self.code]

    def gettext(self, message: str) -> str:
        return self.translations.gettext(message)

    def ngettext(self, singular: str, plural: str, n: int) -> str:
        return self.translations.ngettext(singular, plural, n)

    def pgettext(self, context: str, message: str) -> str:
        """A message whose English is ambiguous ("Archive": the page, or the action)."""
        return self.translations.pgettext(context, message)

    def number(self, value: float) -> str:
        """1234 → "1,234" / "1 234" / "1.234"."""
        return format_decimal(value, locale=self.code)

    def compact(self, value: float) -> str:
        """45000 → "45K" / "45 тыс." / "45 rb" (token counts, as the counter shows them),
        rounded as the browser's ``Intl`` compact format: two significant digits below ten
        of a unit ("1.5K"), whole units above ("33K")."""
        whole = format_compact_decimal(value, locale=self.code, fraction_digits=0)
        if sum(ch.isdigit() for ch in whole) > 1:
            return whole
        return format_compact_decimal(value, locale=self.code, fraction_digits=1)

    @functools.cached_property
    def js_catalog(self) -> Markup:
        """The catalog as JSON for a ``<script type="application/json">`` block: ``<`` is
        escaped so no message can close the element."""
        text = json.dumps(
            {"locale": self.code, "messages": self.browser_catalog},
            ensure_ascii=False,
            sort_keys=True,
        )
        return Markup(text.replace("<", "\\u003c").replace(">", "\\u003e"))


@functools.cache
def languages() -> Mapping[str, Language]:
    """All interface languages, read from their catalogs once per process."""
    out: dict[str, Language] = {}
    for code in LOCALES:
        translations, browser = _read_catalog(code)
        out[code] = Language(code, translations, browser)
    return out


def supported(code: str | None) -> str | None:
    """``code`` as one of :data:`LOCALES` ("ru-RU" → "ru", "in" → "id"), or ``None``."""
    if not code:
        return None
    primary = code.strip().replace("_", "-").split("-", 1)[0].lower()
    primary = _ALIASES.get(primary, primary)
    return primary if primary in LOCALES else None


def from_accept_language(header: str | None) -> str | None:
    """The best of our languages in an ``Accept-Language`` header (by ``q``, then order)."""
    if not header:
        return None
    ranked: list[tuple[float, int, str]] = []
    for position, part in enumerate(header[:_MAX_ACCEPT].split(",")):
        tag, _, params = part.partition(";")
        quality = 1.0
        for param in params.split(";"):
            key, _, value = param.strip().partition("=")
            if key.strip().lower() == "q":
                try:
                    quality = float(value)
                except ValueError:
                    quality = 0.0
        code = supported(tag)
        if code is not None and 0.0 < quality <= 1.0:
            ranked.append((-quality, position, code))
    return min(ranked)[2] if ranked else None


def choose(user_locale: str | None, accept_language: str | None) -> Language:
    """The language of a page: the user's setting, else the browser's, else English."""
    code = supported(user_locale) or from_accept_language(accept_language) or DEFAULT_LOCALE
    return languages()[code]


__all__ = [
    "DEFAULT_LOCALE",
    "LANGUAGE_NAMES",
    "LOCALES",
    "Language",
    "choose",
    "from_accept_language",
    "languages",
    "supported",
]
