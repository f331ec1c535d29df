"""The README documents every setting and the commands a newcomer needs."""

from __future__ import annotations

import importlib.util
import tomllib
from pathlib import Path
from typing import Any

import pytest

from chatmem.settings import Settings

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")


@pytest.mark.parametrize("field", sorted(Settings.model_fields))
def test_every_setting_is_documented_in_readme(field: str) -> None:
    assert f"CHATMEM_{field.upper()}" in README


def test_every_setting_has_help_text() -> None:
    for name, field in Settings.model_fields.items():
        assert field.description, f"{name} has no description"


@pytest.mark.parametrize("command", ["make run", "make test", "make bench", "chatmem context plan"])
def test_readme_names_the_commands(command: str) -> None:
    assert command in README


def _rule_index() -> Any:
    spec = importlib.util.spec_from_file_location("rule_index", ROOT / "docs" / "rule_index.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_architecture_pages_rule_index_is_the_codes() -> None:
    rule_index = _rule_index()
    assert rule_index.current_index() == rule_index.index(), (
        "docs/architecture.md's rule index is out of date: python docs/rule_index.py --write"
    )


def test_the_architecture_page_describes_every_room_of_the_layers() -> None:
    page = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    contract = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    layers = contract["contracts"][0]["layers"]
    rooms = {room.strip().removeprefix("chatmem.") for layer in layers for room in layer.split("|")}
    for room in rooms - {"__main__"}:
        assert f"`{room}/`" in page or f"`{room}`" in page, room
