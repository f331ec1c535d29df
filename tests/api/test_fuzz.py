"""SEC-1 fuzzing: schemathesis walks ``/openapi.json`` against a real ``chatmem serve`` (SQLite,
and PostgreSQL when present) as a signed-in administrator — zero 5xx, and every response as documented
(status, content type, headers, body schema, ``Allow`` on 405).

The server runs offline (``tests.support.offline``): the fuzzer creates profiles and MCP
servers with whatever URLs it likes, and nothing may leave loopback.  Half of the path ids the
fuzzer sends are real objects seeded first (a profile, a folder, a conversation with messages,
a file and a failed run), so handlers are fuzzed past their ``not_found`` too.

``make test`` runs a bounded number of examples per operation (``FUZZ_EXAMPLES``, default 5);
``make fuzz`` runs many more.  Left out on purpose: ``positive_data_acceptance`` — the API
refuses some schema-valid input for reasons a schema cannot state (the SSRF policy, blank
names, text with NUL or lone surrogates, a turn with neither text nor files), always with
a 4xx ``invalid_input`` or ``endpoint_not_allowed``.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from tests.support.app import BACKENDS
from tests.support.runs import finished_run
from tests.support.served import memory, served

EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "5"))
SEED = os.environ.get("FUZZ_SEED", "20261130")
SCHEMATHESIS = Path(sys.executable).with_name("st")


def seed_objects(api: httpx.Client, closed_port: int) -> dict[str, str]:
    """Real objects for the fuzzer's path ids; the profile points at a closed loopback port, so
    a turn fails at once without leaving the machine."""

    def created(response: httpx.Response) -> dict[str, object]:
        assert response.status_code in (200, 201, 202), response.text
        return dict(response.json())

    profile = created(
        api.post(
            "/api/v1/profiles",
            json={
                "name": "fuzz",
                "base_url": f"http://127.0.0.1:{closed_port}/v1",
                "model": "m",
                "free": True,
            },
        )
    )
    folder = created(api.post("/api/v1/folders", json={"name": "fuzz"}))
    conversation = created(
        api.post(
            "/api/v1/conversations",
            json={"title": "fuzz", "folder_id": folder["id"], "profile_id": profile["id"]},
        )
    )
    cid = conversation["id"]
    message = created(
        api.post(f"/api/v1/conversations/{cid}/messages", json={"role": "user", "content": "q"})
    )
    api.post(f"/api/v1/conversations/{cid}/messages", json={"role": "assistant", "content": "a"})
    file = created(
        api.post(f"/api/v1/conversations/{cid}/files", json={"name": "a.txt", "content": "text"})
    )
    run = created(api.post(f"/api/v1/conversations/{cid}/turns", json={"content": "hello"}))
    finished_run(api, run["run_id"])
    return {
        "conversation_id": str(cid),
        "profile_id": str(profile["id"]),
        "folder_id": str(folder["id"]),
        "message_id": str(message["id"]),
        "file_id": str(file["id"]),
        "run_id": str(run["run_id"]),
    }


#: How the API may refuse input that breaks the schema: schemathesis's own list, and 413 — a
#: body over the size limit (8 MiB) is refused before it is read, whatever else is wrong with
#: it (``make fuzz`` sends 12 MB strings past a ``maxLength``).  A 5xx is still a failure:
#: ``not_a_server_error`` checks every answer.
REFUSALS = ["400", "401", "403", "404", "405", "406", "409", "413", "415", "422", "428", "429"]


def config(ids: dict[str, str]) -> str:
    """schemathesis.toml: each path id is a seeded object half of the time."""
    lines = [
        "[checks.negative_data_rejection]",
        f"expected-statuses = {json.dumps(REFUSALS)}",
        "",
    ]
    for name, value in ids.items():
        lines += [f"[dictionaries.{name}]", f'values = ["{value}"]', ""]
    lines.append("[parameters]")
    lines += [f'"path.{name}" = {{ dictionary = "{name}", probability = 0.5 }}' for name in ids]
    return "\n".join(lines) + "\n"


def figures(output: str) -> str:
    """The run's summary lines (operations, phases, test cases, failures)."""
    summary = output.rsplit("SUMMARY", 1)[-1]
    keep = [line.strip() for line in summary.splitlines() if line.strip() and "=" * 5 not in line]
    return " | ".join(keep)


@pytest.mark.parametrize("backend", BACKENDS)
def test_schemathesis_finds_no_5xx_and_every_response_as_documented(
    backend: str, tmp_path: Path
) -> None:
    with served(tmp_path / "state", backend) as server:
        api = server.signed_in("fuzzer", admin=True)  # the admin-only routes too
        ids = seed_objects(api, closed_port=9)
        toml = tmp_path / "schemathesis.toml"
        toml.write_text(config(ids))
        started = time.monotonic()
        result = subprocess.run(
            [
                str(SCHEMATHESIS),
                "--no-color",
                "--config-file",
                str(toml),
                "run",
                f"{server.url}/openapi.json",
                "--header",
                f"Authorization: {api.headers['Authorization']}",
                "--checks",
                "all",
                "--exclude-checks",
                "positive_data_acceptance",
                "--max-examples",
                str(EXAMPLES),
                "--seed",
                SEED,
                "--workers",
                "1",
                "--request-timeout",
                "30",
            ],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            timeout=1800,
        )
        output = result.stdout + result.stderr
        print(
            f"schemathesis on {backend}, {EXAMPLES} examples per operation, "
            f"{time.monotonic() - started:.0f} s: {figures(output)}"
        )
        assert result.returncode == 0, output[-20000:]
        assert re.search(r"\d+ generated, \d+ passed", output), output[-5000:]
        assert server.proc is not None and server.proc.poll() is None, "the server died"
        assert api.get("/healthz").status_code == 200
        assert memory(server.proc.pid)["hwm"] < 1024 * 1024 * 1024
        api.close()


def _integers(
    schema: dict[str, Any], where: str, refs: dict[str, Any]
) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every integer schema in ``schema`` (through ``$ref``, unions, properties, items)."""
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        yield from _integers(refs.pop(name, {}), where, refs)  # each component once
        return
    for key in ("anyOf", "oneOf", "allOf"):
        for part in schema.get(key, []):
            yield from _integers(part, where, refs)
    if schema.get("type") == "integer":
        yield where, schema
    for name, part in schema.get("properties", {}).items():
        yield from _integers(part, f"{where}.{name}", refs)
    if isinstance(schema.get("items"), dict):
        yield from _integers(schema["items"], f"{where}[]", refs)


def test_every_whole_number_the_api_takes_documents_its_range(tmp_path: Path) -> None:
    """The fuzzer's coverage phase sends each integer's documented minimum and maximum (and
    one past each), so a range must be stated — as JSON Schema's ``minimum``/``maximum``,
    not the ``ge``/``le`` pydantic writes for a bound placed after a validator, which no
    client reads.  Then the run on PostgreSQL tries each column's edge: ``?after_seq=``
    documented no range PostgreSQL could hold, and 2**31 answered 500 there unnoticed."""
    from chatmem.settings import Settings
    from chatmem.web.app import create_app

    spec = create_app(Settings(state_dir=tmp_path)).openapi()
    refs = dict(spec["components"]["schemas"])
    found: list[tuple[str, dict[str, Any]]] = []
    for path, operations in spec["paths"].items():
        for method, operation in operations.items():
            at = f"{method.upper()} {path}"
            for parameter in operation.get("parameters", []):
                where = f"{at} {parameter['in']} {parameter['name']}"
                found += _integers(parameter["schema"], where, refs)
            for content in operation.get("requestBody", {}).get("content", {}).values():
                found += _integers(content["schema"], f"{at} body", refs)
    assert any("after_seq" in where for where, _ in found)  # the walk reaches parameters
    unbounded = [
        where
        for where, schema in found
        if "minimum" not in schema or "maximum" not in schema or {"ge", "le"} & schema.keys()
    ]
    assert not unbounded, unbounded
    assert all(s["minimum"] >= -(2**63) and s["maximum"] <= 2**63 - 1 for _, s in found)


def test_the_fuzzed_server_has_no_way_off_loopback() -> None:
    """The guard itself, checked without sending anything anywhere: names other than
    localhost never reach a resolver, and connections go to loopback or nowhere."""
    import socket

    from tests.support import offline

    with pytest.raises(socket.gaierror):
        offline._guarded_getaddrinfo("example.com", 443)
    assert offline._guarded_getaddrinfo("localhost", 80)
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        for address in [("203.0.113.7", 443), ("10.0.0.1", 80), ("169.254.169.254", 80)]:
            assert not offline._allowed(sock, address)
            with pytest.raises(ConnectionRefusedError):
                offline._guarded_connect(sock, address)
        assert offline._allowed(sock, ("127.0.0.1", 9))
    with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as sock:
        assert not offline._allowed(sock, ("2001:db8::1", 443, 0, 0))
        assert offline._allowed(sock, ("::1", 9, 0, 0))
