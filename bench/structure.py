"""The code's shape in figures (issue 27's table), for a before/after of a reshape.

    python bench/structure.py [SRC]      # default: src/chatmem

Prints: module sizes (median, longest), functions of 60 lines or more (and the longest),
files outside ``store/`` importing SQLAlchemy, ``store`` functions whose return annotation
names an ORM table class, parameters typed ``Any`` whose name is a collaborator's, and the
imports between rooms that go against the layers of ``pyproject.toml``'s import-linter
contract. Static reading only (``ast``); nothing is imported.
"""

from __future__ import annotations

import ast
import re
import statistics
import sys
from pathlib import Path

COLLABORATORS = {
    "session", "db", "database", "secrets", "settings", "row", "conn", "connection",
    "policy", "service", "client", "profile", "user", "conversation", "record", "engine",
    "coordinator", "app", "request", "store", "server", "run", "message",
}  # fmt: skip
LAYERS = [
    "__main__", "cli", "web", "turns|auth", "tools", "models", "store", "formats",
    "context|security", "bounds", "settings", "errors",
]  # fmt: skip


def orm_classes(src: Path) -> set[str]:
    names = set()
    for path in (src / "store" / "tables").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef) and any(
                isinstance(b, ast.Name) and b.id == "Base" for b in node.bases
            ):
                names.add(node.name)
    return names


def room_of(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def rank(room: str) -> int:
    return next(i for i, layer in enumerate(LAYERS) if room in layer.split("|"))


def main(src: Path) -> None:
    files = sorted(p for p in src.rglob("*.py") if "migrations" not in p.parts)
    sizes, long_functions, sql_outside, orm_returns, any_collaborators, upward = (
        [], [], [], [], [], set()
    )  # fmt: skip
    orm = orm_classes(src)
    for path in files:
        text = path.read_text()
        rel = path.relative_to(src.parent)
        module = ".".join(rel.with_suffix("").parts).removesuffix(".__init__")
        sizes.append((len(text.splitlines()), str(rel)))
        tree = ast.parse(text)
        in_store = rel.parts[1] == "store"
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length >= 60:
                    long_functions.append((length, f"{rel}:{node.name}"))
                if in_store and node.returns is not None:
                    named = {n.id for n in ast.walk(node.returns) if isinstance(n, ast.Name)}
                    named |= {
                        n.value for n in ast.walk(node.returns) if isinstance(n, ast.Constant)
                        and isinstance(n.value, str)
                    }  # fmt: skip
                    words = {w for n in named for w in re.findall(r"\w+", n)}
                    if words & orm and not node.name.startswith("_"):
                        orm_returns.append(f"{rel}:{node.name}")
                for arg in [*node.args.args, *node.args.kwonlyargs]:
                    ann = ast.unparse(arg.annotation) if arg.annotation else ""
                    if ann == "Any" and arg.arg in COLLABORATORS:
                        any_collaborators.append(f"{rel}:{node.name}({arg.arg})")
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                targets = [node.module]
            for target in targets:
                if target.split(".")[0] in {"sqlalchemy", "alembic"} and not in_store:
                    sql_outside.append(str(rel))
                if target.startswith("chatmem.") and room_of(target) != room_of(module):
                    here, there = room_of(module), room_of(target)
                    try:
                        if rank(there) < rank(here):
                            upward.add(f"{module} -> {target}")
                    except StopIteration:
                        upward.add(f"{module} -> {target} (room not in the layers)")
    lines = [n for n, _ in sizes]
    longest = max(sizes)
    print(f"modules: {len(files)}, {sum(lines):,} lines (migrations left out)")
    print(
        f"module lines: median {statistics.median(lines):.0f}, longest {longest[0]} ({longest[1]})"
    )
    print(f"modules past 400 lines: {sum(n > 400 for n in lines)}")
    long_functions.sort(reverse=True)
    top = long_functions[0] if long_functions else (0, "-")
    print(f"functions >= 60 lines: {len(long_functions)}; longest {top[0]} ({top[1]})")
    print(f"files outside store/ importing SQLAlchemy: {len(set(sql_outside))}")
    print(f"store functions returning ORM rows (by annotation): {len(orm_returns)}")
    print(f"collaborator parameters typed Any: {len(any_collaborators)}")
    print(f"imports against the layers: {len(upward)}")
    for item in sorted(upward):
        print(f"  {item}")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path("src/chatmem"))
