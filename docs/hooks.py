"""MkDocs hook (mkdocs.yml ``hooks``): on the site, each rule id in a page's prose (``CTX-5``,
``TURN-3`` …) links to its definition in rules.md.  The Markdown stays plain, so GitHub shows
the same pages without the links; code, existing links and headings are left alone."""

from __future__ import annotations

import posixpath
import re
from typing import Any

RULE = r"\b(?:STORE|CTX|PROF|PROV|TURN|ARCH|USE|PROJ|SCALE|SEC|APPS|API|OPS)-\d+\b"
# What must not change comes first in the alternation, so a rule id inside it is skipped.
TOKEN = re.compile(r"(`+)[\s\S]*?\1|\[[^\]]*\]\([^)]*\)|<[^>]+>|(?P<rule>" + RULE + ")")
FENCE = re.compile(r"^\s*(```|~~~)")


def on_page_markdown(markdown: str, page: Any, **_: Any) -> str:
    here = posixpath.dirname(page.file.src_uri)
    target = posixpath.relpath("rules.md", here or ".")
    target = "" if page.file.src_uri == "rules.md" else target

    def link(match: re.Match[str]) -> str:
        rule = match.group("rule")
        if rule is None:
            return match.group(0)
        return f"[{rule}]({target}#{rule.lower()})"

    out: list[str] = []
    fenced = False
    for line in markdown.split("\n"):
        if FENCE.match(line):
            fenced = not fenced
        elif not fenced and not line.startswith("#"):
            line = TOKEN.sub(link, line)
        out.append(line)
    return "\n".join(out)
