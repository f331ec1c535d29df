"""Issue 31 §3: ``chatmem backup`` while the server writes, ``chatmem restore`` into a new
state folder, and a server on the restored state finds everything consistent."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import httpx
import pytest
from tests.support.serve import ROOT, ServeProcess

from chatmem.models.profiles import decrypt_api_key
from chatmem.security.secret_box import load_key
from chatmem.store.db import Database
from chatmem.store.profiles import profile_by_id

pytestmark = pytest.mark.slow


def chatmem(state: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHATMEM_")}
    env["CHATMEM_STATE_DIR"] = str(state)
    return subprocess.run(
        [sys.executable, "-m", "chatmem", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


class Writer(threading.Thread):
    """Writes conversations of two messages, one request after another, until stopped."""

    def __init__(self, api: httpx.Client) -> None:
        super().__init__(daemon=True)
        self.api = api
        self.stop = threading.Event()
        self.written = 0
        self.wrote = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            cid = self.api.post("/api/v1/conversations", json={"title": f"w{self.written}"})
            assert cid.status_code == 201, cid.text
            for role, text in (("user", "question"), ("assistant", "answer")):
                said = self.api.post(
                    f"/api/v1/conversations/{cid.json()['id']}/messages",
                    json={"role": role, "content": f"{text} {self.written}"},
                )
                assert said.status_code == 201, said.text
            self.written += 1
            self.wrote.set()


def _all_conversations(api: httpx.Client) -> list[dict[str, object]]:
    found: list[dict[str, object]] = []
    cursor: str | None = None
    while True:
        page = api.get(
            "/api/v1/conversations", params={"limit": 100, **({"cursor": cursor} if cursor else {})}
        ).json()
        found += page["items"]
        cursor = page.get("next_cursor")
        if not cursor:
            return found


def test_a_backup_taken_while_writing_restores_whole(tmp_path: Path) -> None:
    state, copy, restored = tmp_path / "state", tmp_path / "backup", tmp_path / "restored"
    server = ServeProcess(state)
    server.start()
    try:
        api = server.signed_in("alice")
        profile = api.post(
            "/api/v1/profiles",
            json={
                "name": "paid",
                "base_url": "http://127.0.0.1:9/v1",
                "model": "m",
                "api_key": "sk-kept-in-the-backup",
            },
        )
        assert profile.status_code == 201, profile.text
        archived = api.post("/api/v1/conversations", json={"title": "old"}).json()["id"]
        api.post(
            f"/api/v1/conversations/{archived}/messages",
            json={"role": "user", "content": "archived words"},
        )
        assert api.post(f"/api/v1/conversations/{archived}/archive").status_code == 200

        writer = Writer(api)
        writer.start()
        assert writer.wrote.wait(60)
        before = writer.written
        made = chatmem(state, "backup", str(copy))
        during = writer.written - before
        writer.stop.set()
        writer.join(30)
        assert made.returncode == 0, made.stderr
        assert "Backed up the database, the key file, 1 archive file(s)" in made.stderr
        assert during > 0, "the writer wrote nothing while the backup ran"
        total = writer.written
    finally:
        server.stop()

    assert (copy / "chatmem-backup.json").is_file()
    again = chatmem(state, "backup", str(copy))
    assert again.returncode == 1 and "not an empty folder" in again.stderr

    put_back = chatmem(restored, "restore", str(copy))
    assert put_back.returncode == 0, put_back.stderr
    refused = chatmem(restored, "restore", str(copy))
    assert refused.returncode == 1 and "not empty" in refused.stderr

    db = Database(f"sqlite:///{restored / 'chatmem.db'}")
    try:
        with db.session() as session:
            row = profile_by_id(session, profile.json()["id"])
            assert row is not None
            assert decrypt_api_key(row, load_key(restored, None)) == "sk-kept-in-the-backup"
    finally:
        db.dispose()

    revived = ServeProcess(restored)
    revived.start()
    try:
        api = httpx.Client(base_url=revived.url, headers=api.headers, timeout=30)
        live = [c for c in _all_conversations(api) if str(c["title"]).startswith("w")]
        assert before <= len(live) <= total
        for conversation in live:
            messages = api.get(f"/api/v1/conversations/{conversation['id']}/messages").json()
            n = str(conversation["title"])[1:]
            texts = [m["content"] for m in messages["items"]]
            # Each request wrote whole: a conversation has a prefix of its two messages.
            assert texts == [f"question {n}", f"answer {n}"][: len(texts)]
        shown = api.get(f"/api/v1/archive/{archived}")
        assert shown.status_code == 200, shown.text
        back = api.post(f"/api/v1/archive/{archived}/restore")
        assert back.status_code == 200, back.text
        words = api.get(f"/api/v1/conversations/{archived}/messages").json()["items"]
        assert [m["content"] for m in words] == ["archived words"]
    finally:
        revived.stop()


def test_restore_refuses_what_is_not_a_backup(tmp_path: Path) -> None:
    (tmp_path / "junk").mkdir()
    refused = chatmem(tmp_path / "state", "restore", str(tmp_path / "junk"))
    assert refused.returncode == 1
    assert "holds no chatmem backup" in refused.stderr
    assert "Traceback" not in refused.stderr
