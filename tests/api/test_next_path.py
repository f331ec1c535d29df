"""SEC-3: ``safe_next_path`` answers a path on this site, in the form a browser's URL parser
gives it, whatever ``next`` a link carried.  Chromium checks the same answers in
``tests/ui/test_hardening.py``."""

from __future__ import annotations

from urllib.parse import urljoin, urlsplit

import pytest
from hypothesis import given
from hypothesis import strategies as st

from chatmem.web.security import safe_next_path

SITE = "https://site.example/"

#: The pieces a hostile ``next`` is made of: separators, dots (also percent-encoded), encoded
#: slashes and backslashes, whitespace a browser drops, and what starts a query or fragment.
PIECES = [
    "/",
    "\\",
    ".",
    "..",
    "%2e",
    "%2E",
    "%2f",
    "%2F",
    "%5c",
    "%5C",
    "%25",
    "\t",
    "\n",
    " ",
    "?",
    "#",
    ":",
    "@",
    "evil.example",
    "x",
    "é",
]
pieces = st.lists(st.sampled_from(PIECES), max_size=10).map("".join)
next_values = st.one_of(st.text(max_size=40), pieces, pieces.map(lambda p: "/" + p))


@given(next_values)
def test_the_answer_is_always_a_path_on_this_site(value: str) -> None:
    answer = safe_next_path(value)
    assert answer.startswith("/") and not answer.startswith(("//", "/\\"))
    joined = urlsplit(urljoin(SITE, answer))
    assert (joined.scheme, joined.netloc) == ("https", "site.example"), answer
    assert joined.path == urlsplit(answer).path  # no dot segment left for a parser to resolve
    assert safe_next_path(answer) == answer  # a fixed point: nothing left to normalise
    if answer != "/":  # a value kept is one no parser reads as another host
        assert urlsplit(urljoin(SITE, value)).netloc == "site.example", value


@pytest.mark.parametrize(
    "hostile",
    [
        "/.//evil.example/steal",
        "/x/..//evil.example",
        "/%2e//evil.example",
        "/%2E%2e//evil.example",
        "/x/%2e%2E//evil.example",
        "/././/evil.example",
        "/%2F/evil.example",
        "/%2f%2fevil.example",
        "/%5Cevil.example",
        "/%2e%2e/%5C/evil.example",
        "/\\evil.example",
        "//..",
        "//..?x",
        "//./evil.example",
        "/\t/evil.example",
        "/\n/evil.example",
    ],
)
def test_a_path_a_browser_reads_as_another_host_is_refused(hostile: str) -> None:
    assert safe_next_path(hostile) == "/"


@pytest.mark.parametrize(
    ("value", "answer"),
    [
        ("/a/./b/../c", "/a/c"),
        ("/profiles/%2e%2e/archive", "/archive"),
        ("/profiles/.", "/profiles/"),
        ("/profiles/..", "/"),
        ("/../../profiles", "/profiles"),
        ("/a%2Fb", "/a%2Fb"),  # an encoded slash inside a segment stays encoded
        ("/é?q=é'#f`", "/%C3%A9?q=%C3%A9%27#f%60"),
        ("/x?next=/.//evil.example", "/x?next=/.//evil.example"),  # a query is no path
    ],
)
def test_next_is_normalised_as_a_browser_would(value: str, answer: str) -> None:
    assert safe_next_path(value) == answer
