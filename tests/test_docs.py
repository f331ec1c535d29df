"""The documentation stays true: every setting, route, command, error code and rule the code
has is in docs/, the generated references are what the code makes now, and the site builds
strict.  (simonw/datasette's tests/test_docs.py is the model: generated where it can be,
checked where it cannot.)

After adding a setting, a command or a route: `make docs-reference` (python
docs/gen_reference.py), then say on the subject's page what it is for.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
import tomllib
from functools import cache
from pathlib import Path
from types import ModuleType

import pytest

from chatmem.settings import Settings

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
README = (ROOT / "README.md").read_text(encoding="utf-8")
RULES_PAGE = DOCS / "rules.md"
# The shared SPEC beside the clone (/work/main → /work/shared; a worktree one level deeper).
SPEC = next(
    (p / "shared" / "SPEC.md" for p in ROOT.parents[:2] if (p / "shared" / "SPEC.md").exists()),
    ROOT.parent / "shared" / "SPEC.md",
)


def _module(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, DOCS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@cache
def _rule_index() -> ModuleType:
    return _module("rule_index")


@cache
def _gen_reference() -> ModuleType:
    return _module("gen_reference")


@cache
def _docs_text() -> str:
    return "\n".join(p.read_text(encoding="utf-8") for p in sorted(DOCS.rglob("*.md")))


@cache
def _app_routes() -> list[tuple[str, str]]:
    return sorted({(m, p) for m, p, _ in _gen_reference().routes(_gen_reference()._app())})


def _cli_commands() -> list[str]:
    return [" ".join(path) for path, _c, _ctx in _gen_reference()._commands()]


def _defined_rules() -> list[str]:
    return re.findall(r"^### ([A-Z]+-\d+) .*\{#[a-z]+-\d+\}$", RULES_PAGE.read_text(), re.M)


# --- the generated references ------------------------------------------------------------


def test_the_generated_references_are_what_the_code_makes() -> None:
    stale = _gen_reference().stale()
    assert not stale, f"docs/reference/ out of date ({stale}): run make docs-reference"


@pytest.mark.parametrize("field", sorted(Settings.model_fields))
def test_every_setting_is_documented(field: str) -> None:
    assert f"`CHATMEM_{field.upper()}`" in _docs_text()


def test_every_setting_has_help_text() -> None:
    for name, field in Settings.model_fields.items():
        assert field.description, f"{name} has no description"


def test_every_route_is_documented() -> None:
    """Every method and path the app answers (``app.routes``, the pages and ``/healthz``
    included, not only what ``/openapi.json`` lists) is in the HTTP reference."""
    page = (DOCS / "reference" / "http.md").read_text(encoding="utf-8")
    routes = _app_routes()
    assert len(routes) > 50
    missing = [f"{m} {p}" for m, p in routes if f"| `{m}` | `{p}` |" not in page]
    assert not missing, f"not in docs/reference/http.md (make docs-reference): {missing}"


def _named(path: str, text: str) -> bool:
    """The path is on a page whole, or as ``…/`` and its last two segments or more (path
    parameters compared by position, not name: ``{id}`` is ``{conversation_id}``)."""
    parts = re.sub(r"\{[^}]*\}", "{}", path).split("/")
    if "/".join(parts) in text:
        return True
    return any("…/" + "/".join(parts[i:]) in text for i in range(1, len(parts) - 1))


def test_every_api_route_is_told_on_a_subject_page() -> None:
    """The generated reference lists the routes; a page about their subject must say what
    each is for (the pages outside docs/reference/)."""
    pages = sorted(DOCS.glob("*.md"))  # the subject pages, not docs/reference/
    text = re.sub(r"\{[^}]*\}", "{}", "\n".join(p.read_text(encoding="utf-8") for p in pages))
    spec = _gen_reference()._app().openapi()
    missing = [path for path in spec["paths"] if not _named(path, text)]
    assert not missing, f"no page but the generated reference names: {missing}"


def test_every_command_is_documented() -> None:
    commands = _cli_commands()
    assert "chatmem context plan" in commands and "chatmem token revoke" in commands
    missing = [c for c in commands if f"`{c}`" not in _docs_text()]
    assert not missing, missing


def test_every_error_code_is_documented() -> None:
    """Every CONTRACT code chatmem answers with — the error tree's and the web layer's — with
    its status, in the error reference."""
    from chatmem.web.errors import STATUS_BY_CODE

    page = (DOCS / "reference" / "errors.md").read_text(encoding="utf-8")
    codes = set(_gen_reference().error_codes()) | set(STATUS_BY_CODE)
    assert {"does_not_fit", "turn_running", "not_found", "rate_limited"} <= codes
    missing = [c for c in sorted(codes) if not re.search(rf"^\| `{c}` \| \d{{3}} \|", page, re.M)]
    assert not missing, missing


# --- the rules ---------------------------------------------------------------------------


def test_every_rule_cited_in_the_code_is_defined_once() -> None:
    defined = _defined_rules()
    duplicates = sorted({r for r in defined if defined.count(r) > 1})
    assert not duplicates, duplicates
    cited = set(_rule_index().citations())
    assert len(cited) > 50
    undefined = sorted(cited - set(defined), key=_rule_index().rule_key)
    assert not undefined, f"cited in src/ but not defined in docs/rules.md: {undefined}"


def test_every_rule_has_its_statement_and_its_reason() -> None:
    page = RULES_PAGE.read_text(encoding="utf-8")
    for block in re.split(r"^### ", page, flags=re.M)[1:]:
        heading, body = block.split("\n", 1)
        rule = heading.split(" ", 1)[0]
        assert re.match(r"[A-Z]+-\d+ — \S", heading), f"{rule}: no statement in its heading"
        assert "**Why.**" in body, f"{rule} gives no reason"
        assert len(body.split("**Why.**")[1].split()) >= 8, f"{rule}: the reason is too short"


@pytest.mark.skipif(not SPEC.exists(), reason="the shared SPEC.md is not beside this clone")
def test_every_rule_of_the_spec_is_defined() -> None:
    spec = set(_rule_index().RULE.findall(SPEC.read_text(encoding="utf-8")))
    ids = {f"{family}-{number}" for family, number in spec}
    assert not sorted(ids - set(_defined_rules()))


def test_the_architecture_pages_rule_index_is_the_codes() -> None:
    rule_index = _rule_index()
    assert rule_index.current_index() == rule_index.index(), (
        "docs/architecture.md's rule index is out of date: python docs/rule_index.py --write"
    )


def test_the_architecture_page_describes_every_room_of_the_layers() -> None:
    page = (DOCS / "architecture.md").read_text(encoding="utf-8")
    contract = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    layers = contract["contracts"][0]["layers"]
    rooms = {room.strip().removeprefix("chatmem.") for layer in layers for room in layer.split("|")}
    for room in rooms - {"__main__"}:
        assert f"`{room}/`" in page or f"`{room}`" in page, room


# --- the README --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "command", ["make run", "make test", "make bench", "pipx install .", "chatmem context plan"]
)
def test_readme_names_the_commands(command: str) -> None:
    assert command in README


def test_the_readme_stays_short() -> None:
    assert len(README.splitlines()) <= 220, "the reference belongs in docs/, not the README"


def test_the_readmes_links_resolve_on_github_too() -> None:
    """Relative links from the README point at files of the repository (GitHub renders them
    as they are; the site is not involved)."""
    links = re.findall(r"\]\(([^)\s]+)\)|src=\"([^\"]+)\"", README)
    targets = [a or b for a, b in links]
    relative = [t.split("#")[0] for t in targets if not re.match(r"[a-z]+:", t)]
    assert len(relative) > 10
    missing = [t for t in relative if t and not (ROOT / t).exists()]
    assert not missing, missing


# --- the site ----------------------------------------------------------------------------


def test_the_site_builds_strict(tmp_path: Path) -> None:
    """`make docs`: no broken link or anchor, no page outside the nav; and the built pages
    load nothing from another host (no web fonts, no CDN), like the server's own pages."""
    if importlib.util.find_spec("mkdocs") is None or importlib.util.find_spec("material") is None:
        pytest.skip("mkdocs-material is not installed (pip install -e '.[docs]')")
    site = tmp_path / "site"
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    for page in [site / "index.html", site / "rules" / "index.html"]:
        html = page.read_text(encoding="utf-8")
        assets = re.findall(r'<(?:script|link)\b[^>]*\b(?:src|href)="([^"]+)"', html)
        assert assets
        outside = [a for a in assets if re.match(r"(?:[a-z]+:)?//", a)]
        assert not outside, outside
