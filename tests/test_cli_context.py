"""``chatmem context plan`` (CONTRACT): plan JSON on stdout; a bad file is one line, exit 1."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from chatmem.cli import main

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "conversation.json"


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    try:
        main(["context", "plan", *args])
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def test_plan_prints_the_contract_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, str(EXAMPLE), "--draft", "And tomorrow?")
    assert code == 0
    result = json.loads(out)
    assert result["mode"] == "full" and result["fits"] is True
    assert result["messages"][-1] == {"role": "user", "content": "And tomorrow?"}
    assert len(result["status"]) == 12 and set(result["status"].values()) == {"in_memory"}
    assert result["files"] == {"f1": "in_memory"}
    t = result["tokens"]
    assert t["used"] + t["reserve"] + t["free"] == t["window"] == 32768
    assert result["compaction"] == {
        "needed": False,
        "threshold": 26214,
        "messages": 0,
        "covered": 0,
        "rounds": 0,
    }
    assert result["price"]["free"] is True


def test_mode_and_window_options(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, str(EXAMPLE), "--mode", "off", "--window", "9000")
    result = json.loads(out)
    assert code == 0 and result["mode"] == "off" and result["tokens"]["window"] == 9000
    assert set(result["status"].values()) == {"out_of_memory"}
    code, out, _ = run(capsys, str(EXAMPLE), "--mode", "window")
    assert all(m["role"] in ("user", "assistant", "system") for m in json.loads(out)["messages"])


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        ("not json", "not valid JSON"),
        ('{"format": "other"}', "not a chatmem export"),
        ('{"format": "chatmem.export/1", "conversations": []}', "holds no conversation"),
        (
            '{"format": "chatmem.export/1", "conversations": [{"id": "a"}, {"id": "b"}]}',
            "--conversation",
        ),
    ],
)
def test_bad_files_give_one_clear_line_and_exit_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str, needle: str
) -> None:
    path = tmp_path / "in.json"
    path.write_text(content, encoding="utf-8")
    code, out, err = run(capsys, str(path))
    assert code == 1 and out == ""
    assert needle in err and len(err.strip().splitlines()) == 1


def test_several_conversations_need_an_id(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = json.loads(EXAMPLE.read_text(encoding="utf-8"))
    second = dict(doc["conversations"][0], id="c2", mode="economy")
    doc["conversations"].append(second)
    path = tmp_path / "two.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    code, out, _ = run(capsys, str(path), "--conversation", "c2")
    assert code == 0 and json.loads(out)["mode"] == "economy"
    code, _, err = run(capsys, str(path), "--conversation", "c9")
    assert code == 1 and "c9" in err


def test_missing_file_bad_mode_and_bad_window(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(capsys, str(tmp_path / "nope.json"))
    assert code == 1 and "no such file" in err
    code, _, err = run(capsys, str(EXAMPLE), "--mode", "everything")
    assert code == 1 and "unknown mode" in err
    code, _, err = run(capsys, str(EXAMPLE), "--window", "0")
    assert code == 1 and "--window" in err


def test_the_installed_command_runs_offline(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "chatmem", "context", "plan", str(EXAMPLE), "--mode", "economy"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["mode"] == "economy"


def test_compact_simulates_the_fold_a_turn_would_make(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """CTX-21 offline: a 400-message history on an 8K window folds in several rounds, each
    within the window, and the plan after the fold fits with nothing left to fold."""
    words = [
        "the",
        "kitchen",
        "budget",
        "is",
        "12,500",
        "euros",
        "and",
        "the",
        "tiles",
        "are",
        "grey",
        "oak",
    ]
    messages = [
        {
            "id": f"m{i}",
            "role": "user" if i % 2 == 0 else "assistant",
            "content": " ".join(words[(i + k) % len(words)] for k in range(60)),
        }
        for i in range(400)
    ]
    document = {
        "format": "chatmem.export/1",
        "conversations": [{"id": "c1", "title": "Long", "mode": "full", "messages": messages}],
    }
    path = tmp_path / "long.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    code, out, _ = run(capsys, str(path), "--window", "8192")
    before = json.loads(out)
    assert code == 0 and before["fits"] is True and before["compaction"]["needed"] is True
    code, out, _ = run(capsys, str(path), "--window", "8192", "--compact", "--draft", "next?")
    after = json.loads(out)
    assert code == 0 and after["fits"] is True and after["compaction"]["needed"] is False
    rounds = after["fold"]["rounds"]
    assert len(rounds) >= 2 and all(r["stored"] for r in rounds)
    assert all(r["input_tokens"] + r["max_output_tokens"] <= 8192 for r in rounds)
    assert after["fold"]["summary"]["through"] == rounds[-1]["through"]
    assert after["tokens"]["used"] + after["tokens"]["reserve"] <= 8192
    summarised = [k for k, v in after["status"].items() if v == "summarized"]
    assert len(summarised) == after["fold"]["folded"] == rounds[-1]["covered"]
