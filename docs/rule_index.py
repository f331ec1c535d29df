"""The index from SPEC rule id to the modules that implement it, for docs/architecture.md.

    python docs/rule_index.py           # print the index
    python docs/rule_index.py --write   # rewrite it between the markers in architecture.md

A module implements a rule when its code or docstrings cite the rule's id (``CTX-12``);
the modules are listed most citations first, at most four. The SPEC's rule ids are read from
``../shared/SPEC.md`` when it is there, else from the index already in the page (a clone
without the shared folder can still check the page). ``tests/test_docs.py`` fails when the page's
index is not what this prints.
"""

from __future__ import annotations

import re
import sys
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "chatmem"
PAGE = ROOT / "docs" / "architecture.md"
SPEC = ROOT.parent / "shared" / "SPEC.md"
BEGIN, END = "<!-- rule index: begin (docs/rule_index.py) -->", "<!-- rule index: end -->"
RULE = re.compile(r"\b(STORE|CTX|PROF|PROV|TURN|ARCH|USE|PROJ|SCALE|SEC|APPS|API|OPS)-(\d+)\b")
SHOWN = 4


def rule_key(rule: str) -> tuple[str, int]:
    family, number = rule.split("-")
    return family, int(number)


def summary(text: str) -> str:
    """A rule's first sentence, cut to about 60 characters at a word."""
    sentence = re.split(r"(?<=[.;:])\s", " ".join(text.split()), maxsplit=1)[0].rstrip(".;:")
    if len(sentence) <= 60:
        return sentence
    return sentence[:60].rsplit(" ", 1)[0] + " …"


def known_rules() -> list[tuple[str, str]]:
    """Each rule id of the SPEC with the start of what it says."""
    if not SPEC.exists():
        rows = [line.split("|") for line in current_index().splitlines()[2:]]
        return [(row[1].strip(), row[2].strip()) for row in rows]
    rules: dict[str, str] = {}
    for block in re.split(r"\n(?=- )", SPEC.read_text(encoding="utf-8")):
        match = re.match(r"- (" + RULE.pattern + r") (.*)", block, re.S)
        if match and match.group(1) not in rules:
            rules[match.group(1)] = summary(match.group(4).split("\n\n")[0])
    return sorted(rules.items(), key=lambda item: rule_key(item[0]))


def citations() -> dict[str, Counter[str]]:
    cited: dict[str, Counter[str]] = defaultdict(Counter)
    for path in sorted(SRC.rglob("*")):
        if path.suffix not in {".py", ".js", ".html", ".css"} or {"vendor", "migrations"} & set(
            path.parts
        ):
            continue
        rel = path.relative_to(SRC.parent).as_posix()
        for match in RULE.finditer(path.read_text(encoding="utf-8")):
            cited[match.group(0)][rel] += 1
    return cited


def index() -> str:
    cited = citations()
    lines = ["| rule | says | where it lives |", "|---|---|---|"]
    for rule, says in known_rules():
        modules = [m for m, _ in sorted(cited[rule].items(), key=lambda kv: (-kv[1], kv[0]))]
        shown = ", ".join(f"`{m}`" for m in modules[:SHOWN]) or "not cited in the code yet"
        more = f" and {len(modules) - SHOWN} more" if len(modules) > SHOWN else ""
        lines.append(f"| {rule} | {says} | {shown}{more} |")
    return "\n".join(lines)


def current_index() -> str:
    page = PAGE.read_text(encoding="utf-8")
    return page.split(BEGIN, 1)[1].split(END, 1)[0].strip()


def write() -> None:
    page = PAGE.read_text(encoding="utf-8")
    head, rest = page.split(BEGIN, 1)
    tail = rest.split(END, 1)[1]
    PAGE.write_text(f"{head}{BEGIN}\n{index()}\n{END}{tail}", encoding="utf-8")


if __name__ == "__main__":
    write() if "--write" in sys.argv[1:] else print(index())
