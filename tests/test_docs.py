"""The README documents every setting and the commands a newcomer needs."""

from __future__ import annotations

from pathlib import Path

import pytest

from chatmem.settings import Settings

README = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")


@pytest.mark.parametrize("field", sorted(Settings.model_fields))
def test_every_setting_is_documented_in_readme(field: str) -> None:
    assert f"CHATMEM_{field.upper()}" in README


def test_every_setting_has_help_text() -> None:
    for name, field in Settings.model_fields.items():
        assert field.description, f"{name} has no description"


@pytest.mark.parametrize("command", ["make run", "make test", "make bench", "chatmem context plan"])
def test_readme_names_the_commands(command: str) -> None:
    assert command in README
