"""Issue 25, the high finding: an imported id never names a file.

A chatmem export whose conversation ``id`` was a path, with ``"archived": true``, had its archive
written to ``<id>.json.zst`` wherever the server could write.  Now an imported id not of
chatmem's own form gets a new id (the file's id stays the source key, for dedupe), and the
archiver checks the name and the resolved path where it makes the path.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from tests.support.app import ApiUser

from chatmem.errors import InvalidInput
from chatmem.settings import Settings
from chatmem.store.archive import Archiver
from chatmem.store.db import Database
from chatmem.store.types import is_own_id, new_id


@pytest.fixture
def settings(settings: Settings) -> Settings:
    """Archives in files on every backend (PostgreSQL's default keeps them in the database)."""
    return settings.model_copy(update={"archive_storage": "file"})


@pytest.fixture
def outside() -> Iterator[Path]:
    """A short folder outside the state directory (ids of ≤ 32 characters could reach it)."""
    folder = Path(tempfile.mkdtemp(prefix="cm", dir="/tmp"))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def export(cid: str, **fields: Any) -> dict[str, Any]:
    return {
        "format": "chatmem.export/1",
        "conversations": [
            {
                "id": cid,
                "archived": True,
                "mode": "full",
                "messages": [
                    {
                        "id": "m1",
                        "role": "user",
                        "content": "x",
                        "excluded": False,
                        "created_at": "2026-12-01T00:00:00Z",
                    }
                ],
                **fields,
            }
        ],
    }


def post_import(client: TestClient, user: ApiUser, document: dict[str, Any]) -> Any:
    body = json.dumps(document).encode()
    return client.post(
        "/api/v1/import",
        files={"file": ("export.json", body, "application/json")},
        headers=user.headers,
    )


def files_under(folder: Path) -> set[Path]:
    return {Path(root) / name for root, _, names in os.walk(folder) for name in names}


def stray_files(state: Path, *folders: Path) -> set[Path]:
    """Files under ``folders`` that are not under the state directory."""
    return {p for f in folders for p in files_under(f) if not p.is_relative_to(state)}


@pytest.mark.parametrize(
    "form",
    ["{outside}/SLIP", "../../../SLIP", "{outside}/./victim", "../../../../../../../..{outside}/x"],
)
def test_a_path_as_id_gets_a_new_id_and_writes_nowhere_else(
    client: TestClient,
    user: ApiUser,
    settings: Settings,
    outside: Path,
    form: str,
) -> None:
    victim = outside / "victim.json.zst"
    victim.write_bytes(b"precious")
    hostile = form.format(outside=outside)
    before = files_under(settings.state_dir.parent)

    answer = post_import(client, user, export(hostile))

    assert answer.status_code == 200, answer.text
    [cid] = answer.json()["conversation_ids"]
    assert is_own_id(cid) and cid != hostile
    assert victim.read_bytes() == b"precious"
    assert files_under(outside) == {victim}
    new = files_under(settings.state_dir.parent) - before
    assert all(p.is_relative_to(settings.state_dir) for p in new), new
    archive = settings.state_dir / "archive" / user.id / f"{cid}.json.zst"
    assert archive.is_file()
    read = client.get(f"/api/v1/archive/{cid}", headers=user.headers)
    assert read.status_code == 200 and [m["content"] for m in read.json()["messages"]] == ["x"]

    again = post_import(client, user, export(hostile))  # the source id still dedupes
    assert again.status_code == 200 and again.json()["imported"] == 0
    assert again.json()["skipped"] == 1


def test_own_form_ids_are_kept(client: TestClient, user: ApiUser) -> None:
    """A lossless round trip to another server keeps chatmem's own ids."""
    cid, mid = new_id(), new_id()
    document = export(cid)
    document["conversations"][0]["messages"][0]["id"] = mid
    answer = post_import(client, user, document)
    assert answer.status_code == 200 and answer.json()["conversation_ids"] == [cid]
    read = client.get(f"/api/v1/archive/{cid}", headers=user.headers).json()
    assert [m["id"] for m in read["messages"]] == [mid]


@pytest.mark.parametrize(
    ("user_id", "conversation_id"),
    [
        ("u" * 32, "0" * 32),
        ("1" * 32, "../x"),
        ("1" * 32, "/etc/passwd"),
        ("1" * 32, "c1"),
        ("1" * 32, "A" * 32),
        ("1" * 32, "2" * 32 + "\n"),
    ],
)
def test_the_archiver_names_only_ids_of_its_form(
    settings: Settings, user_id: str, conversation_id: str
) -> None:
    archiver = Archiver(Database(settings.sqlalchemy_url()), settings.state_dir)
    with pytest.raises(InvalidInput):
        archiver.path_for(user_id, conversation_id)


def test_the_archiver_refuses_a_link_planted_in_the_folder(
    settings: Settings, outside: Path
) -> None:
    user_id, cid = new_id(), new_id()
    archiver = Archiver(Database(settings.sqlalchemy_url()), settings.state_dir)
    folder = settings.state_dir / "archive" / user_id
    folder.mkdir(parents=True)
    assert archiver.path_for(user_id, cid) == folder.resolve() / f"{cid}.json.zst"
    (folder / f"{cid}.json.zst").symlink_to(outside / "target.json.zst")
    with pytest.raises(InvalidInput):
        archiver.path_for(user_id, cid)


_SEGMENTS = st.sampled_from(["..", ".", "", "x", "SLIP", "%2e%2e", "\\..", "~", "a b", "\x00"])
_IDS = st.one_of(
    st.lists(_SEGMENTS, min_size=1, max_size=12).map("/".join),
    st.lists(_SEGMENTS, min_size=1, max_size=8).map(lambda s: "/" + "/".join(s)),
    st.text(min_size=1, max_size=40),
)


@hypothesis_settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(hostile=_IDS, absolute=st.booleans())
def test_no_imported_id_creates_a_file_outside_the_state_directory(
    client: TestClient,
    user: ApiUser,
    settings: Settings,
    outside: Path,
    hostile: str,
    absolute: bool,
) -> None:
    cid = f"{outside}/{hostile}" if absolute else hostile
    answer = post_import(client, user, export(cid))
    assert answer.status_code in (200, 422), answer.text
    if answer.status_code == 200:
        assert all(is_own_id(i) for i in answer.json()["conversation_ids"])
    assert stray_files(settings.state_dir, settings.state_dir.parent, outside) == set()
