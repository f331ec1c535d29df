"""STORE-5 from the command line: ``chatmem import FILE [--user]`` and ``chatmem export -o``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.exchange.builders import make_user, open_db

from chatmem.cli import main
from chatmem.settings import Settings

SAMPLES = Path(__file__).parent / "samples"
KITCHEN = "c1" + "0" * 30  # the sample chatmem export's first conversation (ids of its form)


def run(argv: list[str]) -> int:
    try:
        main(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    return 0


@pytest.fixture
def users() -> dict[str, str]:
    settings = Settings()
    settings.state_dir.mkdir(parents=True, exist_ok=True)
    db = open_db(settings.sqlalchemy_url())
    try:
        from chatmem.store import accounts

        with db.session() as session:
            admin = accounts.create_user(session, "root", is_admin=True).id
        return {"root": admin, "bob": make_user(db, "bob")}
    finally:
        db.dispose()


def test_import_then_export_for_the_admin_by_default(
    users: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(["import", str(SAMPLES / "chatgpt_conversations.json")]) == 0
    out = capsys.readouterr().out
    assert "Imported 2 conversation(s) with 6 message(s) from a ChatGPT export." in out
    assert run(["import", str(SAMPLES / "chatgpt_conversations.json")]) == 0
    assert "2 already present, skipped" in capsys.readouterr().out

    target = tmp_path / "out.json"
    assert run(["export", "-o", str(target)]) == 0
    document = json.loads(target.read_text())
    assert document["format"] == "chatmem.export/1"
    assert sorted(c["title"] for c in document["conversations"]) == [
        "Sourdough starter",
        "Untitled branchless",
    ]
    assert not list(tmp_path.glob(".*partial"))

    assert run(["export", "--user", "bob", "-o", str(target)]) == 0
    assert json.loads(target.read_text())["conversations"] == []
    assert run(["import", str(target), "--user", "bob"]) == 0


def test_export_of_one_conversation(users: dict[str, str], tmp_path: Path) -> None:
    assert run(["import", str(SAMPLES / "chatmem_export.json"), "--user", "bob"]) == 0
    target = tmp_path / "one.json"
    assert run(["export", "--user", "bob", "--conversation", KITCHEN, "-o", str(target)]) == 0
    (conversation,) = json.loads(target.read_text())["conversations"]
    assert conversation["id"] == KITCHEN and conversation["folder"] == "Home"
    assert run(["export", "--conversation", KITCHEN, "-o", str(target)]) == 1  # root's: not found


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (
            ["import", str(SAMPLES / "chatgpt_conversations.json"), "--user", "nobody"],
            "user 'nobody' not found",
        ),
        (["import", __file__], "not valid JSON"),
    ],
)
def test_errors_are_one_line_with_status_1(
    users: dict[str, str], capsys: pytest.CaptureFixture[str], argv: list[str], needle: str
) -> None:
    assert run(argv) == 1
    err = capsys.readouterr().err
    assert needle in err and "Traceback" not in err


def test_missing_file_is_a_usage_error(users: dict[str, str], tmp_path: Path) -> None:
    assert run(["import", str(tmp_path / "nope.json")]) == 2


def test_a_broken_file_imports_nothing(
    users: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = tmp_path / "broken.json"
    broken.write_bytes((SAMPLES / "claude_conversations.json").read_bytes()[:-30])
    assert run(["import", str(broken)]) == 1
    target = tmp_path / "out.json"
    assert run(["export", "-o", str(target)]) == 0
    assert json.loads(target.read_text())["conversations"] == []


def test_progress_bar_by_bytes_on_a_terminal(
    users: dict[str, str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("TTY_COMPATIBLE", "1")  # rich: treat stderr as a terminal
    assert run(["import", str(SAMPLES / "openwebui_export.json")]) == 0
    captured = capsys.readouterr()
    assert "Importing openwebui_export.json" in captured.err
    size = (SAMPLES / "openwebui_export.json").stat().st_size
    assert f"{size / 1000:.1f}/{size / 1000:.1f} kB" in captured.err
    assert "Imported 2 conversation(s)" in captured.out


def test_without_an_admin_the_user_must_be_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = Settings()
    settings.state_dir.mkdir(parents=True, exist_ok=True)
    db = open_db(settings.sqlalchemy_url())
    make_user(db, "ann"), make_user(db, "ben")
    db.dispose()
    assert run(["export", "-o", str(tmp_path / "x.json")]) == 1
    assert "--user" in capsys.readouterr().err


def test_an_exported_conversation_feeds_context_plan(
    users: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The export is the CONTRACT's input of ``chatmem context plan`` (extras and all)."""
    assert run(["import", str(SAMPLES / "chatmem_export.json")]) == 0
    target = tmp_path / "one.json"
    assert run(["export", "--conversation", KITCHEN, "-o", str(target)]) == 0
    capsys.readouterr()
    assert run(["context", "plan", str(target)]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["mode"] == "economy"
    assert set(plan["status"]) == {f"e{i}" + "0" * 30 for i in range(1, 7)}
