"""The engine is pure (SPEC §2, STYLE): no other chatmem module, no SQLAlchemy/httpx/FastAPI,
no environment.  Checked in a fresh interpreter so other tests' imports do not interfere."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

FORBIDDEN_PREFIXES = ("sqlalchemy", "httpx", "fastapi", "starlette", "pydantic_settings")

SCRIPT = textwrap.dedent(
    """
    import json, os, sys

    class RecordingEnviron(dict):
        reads = []
        def __getitem__(self, key):
            self.reads.append(key); return super().__getitem__(key)
        def get(self, key, default=None):
            self.reads.append(key); return super().get(key, default)
        def __contains__(self, key):
            self.reads.append(key); return super().__contains__(key)
        def __iter__(self):
            self.reads.append("<iter>"); return super().__iter__()

    import chatmem.context as engine
    from chatmem.context.document import load_export
    loaded = sorted(m for m in sys.modules if m == "chatmem" or m.startswith("chatmem."))

    recorder = RecordingEnviron(os.environ)
    os.environ = recorder
    messages = tuple(
        engine.Message(f"m{i}", "user" if i % 2 == 0 else "assistant", "text " * (i % 7))
        for i in range(200)
    )
    conv = engine.Conversation(
        messages=messages,
        summary=engine.Summary("s", through="m9"),
        files=(engine.File("f", "a.txt", "x", message_id="m199"),),
    )
    for mode in engine.MODES:
        engine.plan(conv, engine.Profile(), mode=mode, draft="hi").to_dict()
    engine.compaction_request(conv, engine.Profile(), mode="full", manual=True)
    print(json.dumps({"loaded": loaded, "modules": sorted(sys.modules), "reads": recorder.reads}))
    """
)


def _run() -> dict[str, list[str]]:
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, check=True, timeout=60
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


def test_engine_is_pure_imports_nothing_else_and_reads_no_environment() -> None:
    result = _run()
    allowed = {"chatmem", "chatmem.context"}
    assert all(m in allowed or m.startswith("chatmem.context.") for m in result["loaded"])
    forbidden = [m for m in result["modules"] if m.split(".")[0] in FORBIDDEN_PREFIXES]
    assert forbidden == []
    assert result["reads"] == []
