"""Side-by-side load benchmark (issue 12).  Exit status 1 when a bar is missed.

Every peer is its own server process on loopback, in front of the SAME fake OpenAI-compatible
provider (``tests.support.model_server`` in its own process; a fixed reply of 20 deltas, no
delay, usage at the end).  This process is the client (httpx.AsyncClient), so the client,
the peer and the provider are three processes, as deployed:

* **provider** — the fake provider called directly: the baseline every TTFT overhead is
  measured against.
* **bare proxy** — ``bench/_bare_proxy.py``, a Starlette app relaying the provider's streamed
  bytes with httpx: the physical limit of one HTTP hop.
* **LiteLLM** — ``litellm --config …`` from a virtualenv of its own (``.venv-peers``, made by
  ``make bench``); skipped with its reason when it is not installed or does not start.
* **chatmem/SQLite**, **chatmem/PostgreSQL** — ``chatmem serve`` on a fresh SQLite file, and on a
  fresh PostgreSQL database (``CHATMEM_BENCH_POSTGRES_URL``, default
  ``postgresql://postgres@127.0.0.1:5432/test``; skipped when unreachable).  A chatmem turn is
  ``POST …/turns`` with ``Accept: text/event-stream``, read to its ``done`` (the one-request
  path; on a server without it, ``POST …/turns`` then ``GET /api/v1/runs/{id}/events``); one
  conversation per client, since a conversation runs one turn at a time.

Figures: TTFT p50 over sequential turns (request → first content delta) and its overhead over
the provider's; for chatmem also the one-request path (``POST …/turns`` with ``Accept:
text/event-stream``, "n/a" while the server answers it with JSON); turns/s at 1 and 10 streams;
100 concurrent streams (TTFT p50, turns/s); 200 concurrent conversation creates (5xx, p99);
1,000 SSE watchers of 10 slow running turns (all end with ``done`` and the same text); server
RSS idle and at 100 streams (the process and its children).

The client runs with Python's garbage collector off, collecting between phases (as
``timeit`` does): with it on, its full collections (120–160 ms every few seconds at 100
streams) stalled every stream at once, and the stall was counted in the server's TTFT.

``.venv/bin/python bench/load.py [--quick] [--only bare,litellm,sqlite,postgresql]``
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import gc
import json
import os
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402
from tests.support.model_server import RemoteModelServer  # noqa: E402
from tests.support.serve import ServeProcess, free_port, stop_process  # noqa: E402
from tests.support.served import PostgresUnreachable, throwaway_postgres  # noqa: E402

from chatmem.store import accounts  # noqa: E402
from chatmem.store.db import Database  # noqa: E402

LITELLM_VENV = Path(os.environ.get("CHATMEM_BENCH_LITELLM_VENV", ROOT / ".venv-peers"))
PG_ADMIN_URL = os.environ.get(
    "CHATMEM_BENCH_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"
)
PEER_KEYS = ("bare", "litellm", "sqlite", "postgresql")
REPLY = " ".join(f"w{i}" for i in range(20))  # the fake streams it word by word: 20 deltas
SLOW_DELAY = 0.1  # seconds between deltas of the watched turns (20 deltas: about 2 s)
BODY = {
    "model": "fake-model",
    "messages": [{"role": "user", "content": "hi"}],
    "stream": True,
    "stream_options": {"include_usage": True},
}
LITELLM_START_TIMEOUT = 90.0
SUBMIT_RETRIES = 500  # 409 turn_running right after the previous turn's done: 10 ms apart
BUSY_CODES = ("turn_running", "compaction_running")
WARM_UP = 5  # rounds of sequential turns not counted (connections, caches)

# Bars from issue 12.
OVERHEAD_FACTOR = 2.0  # chatmem TTFT overhead p50 ≤ 2× the bare proxy's
C100_TTFT_BAR = 0.300  # 100 concurrent streams: TTFT p50 ≤ 300 ms
C100_LITELLM_FACTOR = 2.0  # … and turns/s ≥ 2× LiteLLM's
CREATE_P99_BAR = 2.0  # 200 concurrent creates: no 5xx, p99 ≤ 2 s
CREATE_TIMEOUT = 30.0  # a create unanswered by then counts as failed (and at this latency)


@dataclass(frozen=True)
class Sizes:
    sequential: int = 200  # sequential turns for the TTFT p50
    one_stream: int = 50  # turns at 1 stream, for turns/s
    ten_streams: int = 10  # turns per client at 10 streams
    hundred_streams: int = 5  # turns per client at 100 streams
    creates: int = 200
    watched_runs: int = 10
    watchers_per_run: int = 100


QUICK = Sizes(sequential=40, one_stream=20, ten_streams=3, hundred_streams=2)


@dataclass
class Load:
    """One phase: the TTFT of every turn that streamed, its duration and its failures."""

    ttfts: list[float] = field(default_factory=list)
    #: Per turn, the longest wait between two content deltas (a stalled answer).
    gaps: list[float] = field(default_factory=list)
    elapsed: float = 0.0
    completed: int = 0
    errors: int = 0
    retried: int = 0  # turns whose submit was answered 409 (BUSY_CODES) at first
    busy: collections.Counter[str] = field(default_factory=collections.Counter)
    reasons: collections.Counter[str] = field(default_factory=collections.Counter)

    @property
    def turns_per_s(self) -> float:
        return self.completed / self.elapsed if self.elapsed else 0.0

    @property
    def ttft_p50(self) -> float | None:
        return statistics.median(self.ttfts) if self.ttfts else None

    def gap(self, quantile: float) -> float | None:
        if not self.gaps:
            return None
        ordered = sorted(self.gaps)
        return ordered[min(len(ordered) - 1, int(len(ordered) * quantile))]


@dataclass
class Figures:
    ttft: Load | None = None
    ttft_one_request: Load | None = None
    one_request_path: bool = False  # does POST …/turns stream its events when asked?
    one: Load | None = None
    ten: Load | None = None
    hundred: Load | None = None
    creates_5xx: int | None = None
    creates_failed: int = 0  # no HTTP answer within CREATE_TIMEOUT
    creates_p99: float | None = None
    creates_statuses: str = ""
    watchers: str = ""
    watchers_ok: bool | None = None
    rss_idle: float | None = None
    rss_100: float | None = None
    cpu_per_turn: float | None = None  # server CPU seconds per turn at 100 streams
    client_cpu: float | None = None  # client CPU seconds per second at 100 streams


@dataclass
class Peer:
    """A server under test.  ``kind`` "openai" takes ``POST /v1/chat/completions``; "chatmem"
    takes turns (``profile_id``: the fake provider's profile, ``headers``: a user's token)."""

    key: str
    name: str
    kind: str
    url: str = ""
    pid: int | None = None
    headers: dict[str, str] = field(default_factory=dict)
    profile_id: str = ""
    skipped: str | None = None
    failed: str | None = None  # a phase that broke off: the figures before it stand
    figures: Figures = field(default_factory=Figures)
    stack: contextlib.ExitStack | None = field(default=None, repr=False)  # stops its process

    def stop(self) -> None:
        if self.stack is not None:
            self.stack.close()
            self.stack = None

    @property
    def chat_url(self) -> str:
        return self.url + "/chat/completions"


class PeerFailed(Exception):
    """A peer that could not be started; the message is the reason shown."""


# --- processes ------------------------------------------------------------------------------


def _stat_fields(pid: int | str) -> list[str]:
    """``/proc/<pid>/stat`` after the command name: [state, ppid, …] (field 3 onwards)."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def process_tree(pid: int) -> list[int]:
    """``pid`` and all its descendants (LiteLLM may run workers)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, IndexError):
                children.setdefault(int(_stat_fields(entry.name)[1]), []).append(int(entry.name))
    tree, todo = [], [pid]
    while todo:
        current = todo.pop()
        tree.append(current)
        todo.extend(children.get(current, []))
    return tree


def rss_mb(pid: int | None) -> float | None:
    """VmRSS of ``pid`` and all its descendants, in MB."""
    if pid is None:
        return None
    total_kb = 0
    for member in process_tree(pid):
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{member}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total_kb += int(line.split()[1])
    return total_kb / 1024


def cpu_seconds(pid: int | None) -> float | None:
    """User + system CPU time of ``pid`` and its living descendants."""
    if pid is None:
        return None
    ticks = 0
    for member in process_tree(pid):
        with contextlib.suppress(OSError, IndexError):
            fields = _stat_fields(member)
            ticks += int(fields[11]) + int(fields[12])  # utime, stime
    return ticks / os.sysconf("SC_CLK_TCK")


@contextlib.contextmanager
def provider_process() -> Iterator[tuple[RemoteModelServer, int]]:
    """The fake provider in its own process (``bench/_provider.py``: a deeper listen backlog)."""
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "bench" / "_provider.py"), "--port", "0"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    try:
        if not line.startswith("READY "):
            raise RuntimeError(f"the fake provider did not start: {line!r}")
        yield RemoteModelServer(line.split()[1]), proc.pid
    finally:
        stop_process(proc)
        proc.stdout.close()


def wait_ready(proc: subprocess.Popen[bytes], url: str, timeout: float, log: Path) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            tail = log.read_text(errors="replace").strip().splitlines()[-1:] or ["no output"]
            raise PeerFailed(f"exited with status {proc.returncode}: {tail[0][:200]}")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(url, timeout=2).status_code == 200:
                return
        time.sleep(0.2)
    raise PeerFailed(f"not answering {url} after {timeout:.0f} s")


@contextlib.contextmanager
def server_process(
    args: list[str],
    ready_path: str,
    port: int,
    tmp: Path,
    *,
    env: dict[str, str] | None = None,
    timeout: float = 30.0,
) -> Iterator[subprocess.Popen[bytes]]:
    log = tmp / f"server-{port}.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            args, cwd=tmp, stdout=out, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})}
        )
    try:
        wait_ready(proc, f"http://127.0.0.1:{port}{ready_path}", timeout, log)
        yield proc
    finally:
        stop_process(proc)


@contextlib.contextmanager
def bare_proxy(model: RemoteModelServer, tmp: Path) -> Iterator[Peer]:
    port = free_port()
    args = [sys.executable, str(ROOT / "bench" / "_bare_proxy.py"), "--port", str(port)]
    with server_process([*args, "--upstream", model.base_url], "/healthz", port, tmp) as proc:
        yield Peer("bare", "bare proxy", "openai", f"http://127.0.0.1:{port}/v1", proc.pid)


@contextlib.contextmanager
def litellm_proxy(model: RemoteModelServer, tmp: Path) -> Iterator[Peer]:
    # LiteLLM lives in a virtualenv of its own (``make bench`` makes it: its proxy pins
    # versions chatmem's dependencies have outgrown); never imported here.
    executable = LITELLM_VENV / "bin" / "litellm"
    if not executable.exists():
        raise PeerFailed(f"not installed: no {executable} (make bench installs it)")
    key = "sk-" + secrets.token_hex(24)
    config = tmp / "litellm.yaml"
    config.write_text(
        "model_list:\n"
        "  - model_name: fake-model\n"
        "    litellm_params:\n"
        "      model: openai/fake-model\n"
        f"      api_base: {model.base_url}\n"
        "      api_key: sk-fake\n"
        "general_settings:\n"
        f"  master_key: {key}\n"
    )
    port = free_port()
    args = [str(executable), "--config", str(config), "--host", "127.0.0.1", "--port", str(port)]
    # No internet: the bundled price table, no telemetry.
    env = {"LITELLM_LOCAL_MODEL_COST_MAP": "True", "LITELLM_TELEMETRY": "False"}
    with server_process(
        args, "/health/liveliness", port, tmp, env=env, timeout=LITELLM_START_TIMEOUT
    ) as proc:
        yield Peer(
            "litellm",
            "LiteLLM",
            "openai",
            f"http://127.0.0.1:{port}/v1",
            proc.pid,
            headers={"Authorization": f"Bearer {key}"},
        )


@contextlib.contextmanager
def postgres_database() -> Iterator[str]:
    """A fresh database next to ``PG_ADMIN_URL``'s, dropped afterwards."""
    try:
        with throwaway_postgres(PG_ADMIN_URL, "chatmem_bench") as url:
            yield url
    except PostgresUnreachable as exc:
        raise PeerFailed(str(exc)) from None


@contextlib.contextmanager
def chatmem_serve(
    key: str, model: RemoteModelServer, tmp: Path, database_url: str | None = None
) -> Iterator[Peer]:
    state = tmp / key
    env = {"CHATMEM_DATABASE_URL": database_url} if database_url else {}
    server = ServeProcess(state, **env)
    try:
        server.start()
    except AssertionError as exc:
        server.stop()
        raise PeerFailed(f"chatmem serve did not start: {exc}") from None
    try:
        assert server.proc is not None
        name = "chatmem/PostgreSQL" if database_url else "chatmem/SQLite"
        peer = Peer(key, name, "chatmem", server.url, server.proc.pid)
        peer.figures.rss_idle = rss_mb(peer.pid)
        peer.headers = {"Authorization": f"Bearer {api_token(server.database_url)}"}
        profile = httpx.post(
            server.url + "/api/v1/profiles",
            headers=peer.headers,
            json={"name": "fake", "base_url": model.base_url, "model": "fake-model", "free": True},
        )
        profile.raise_for_status()
        peer.profile_id = profile.json()["id"]
        yield peer
    finally:
        server.stop()


def api_token(database_url: str) -> str:
    db = Database(database_url)
    try:
        with db.session() as session:
            user = accounts.create_user(session, "bench")
            return accounts.create_api_token(session, user, label="bench")
    finally:
        db.dispose()


# --- one turn, as each kind of peer takes it ------------------------------------------------


def _has_content(line: str) -> bool:
    if not line.startswith("data: {"):
        return False
    choices = json.loads(line[6:]).get("choices") or [{}]
    return bool((choices[0].get("delta") or {}).get("content"))


class Deltas:
    """When a stream's content deltas arrived: the first one (TTFT) and the longest wait
    between two of them."""

    def __init__(self, started: float) -> None:
        self.started = started
        self.ttft: float | None = None
        self.gap = 0.0
        self._last = 0.0

    def arrived(self) -> None:
        now = time.perf_counter()
        if self.ttft is None:
            self.ttft = now - self.started
        else:
            self.gap = max(self.gap, now - self._last)
        self._last = now


async def openai_turn(client: httpx.AsyncClient, peer: Peer) -> Deltas | None:
    """One streamed completion, read to its end; when its content deltas came."""
    deltas = Deltas(time.perf_counter())
    async with client.stream("POST", peer.chat_url, json=BODY, headers=peer.headers) as response:
        if response.status_code != 200:
            await response.aread()
            return None
        async for line in response.aiter_lines():
            if _has_content(line):
                deltas.arrived()
    return deltas


@dataclass
class RunRead:
    """What one SSE reader of a run saw."""

    ttft: float | None = None
    gap: float = 0.0  # the longest wait between two deltas
    text: str = ""
    done: bool = False
    failure: str = ""  # e.g. "submit 500 internal_error"
    busy: collections.Counter[str] = field(default_factory=collections.Counter)  # 409s first


async def read_run(response: httpx.Response, started: float) -> RunRead:
    seen = RunRead()
    deltas = Deltas(started)
    parts: list[str] = []
    kind = ""
    async for line in response.aiter_lines():
        if line.startswith("event: "):
            kind = line[7:]
            if kind == "delta":
                deltas.arrived()
            seen.done = seen.done or kind == "done"
        elif line.startswith("data: ") and kind == "delta":
            parts.append(json.loads(line[6:]).get("text", ""))
    seen.text = "".join(parts)
    seen.ttft, seen.gap = deltas.ttft, deltas.gap
    return seen


async def watch_run(client: httpx.AsyncClient, peer: Peer, run_id: str, started: float) -> RunRead:
    url = f"{peer.url}/api/v1/runs/{run_id}/events"
    async with client.stream("GET", url, headers=peer.headers) as response:
        if response.status_code != 200:
            await response.aread()
            return RunRead(failure=f"events {response.status_code}")
        return await read_run(response, started)


def _code(body: bytes) -> str:
    """The ``error.code`` of chatmem's error body, or its first bytes."""
    try:
        return str(json.loads(body)["error"]["code"])
    except (ValueError, KeyError, TypeError):
        return body[:60].decode("utf-8", "replace")


async def chatmem_turn(
    client: httpx.AsyncClient, peer: Peer, conversation: str, *, one_request: bool = False
) -> RunRead:
    """Submit a turn and read its events to ``done``.  ``one_request``: ask the submit itself
    to stream the events (``ttft`` stays None when the server answers with JSON instead).

    A submit answered 409 ``turn_running`` or ``compaction_running`` (the conversation's
    previous turn sent its ``done`` but has not let go yet) is retried every 10 ms and counted
    in ``busy``; the TTFT runs from the accepted submit."""
    url = f"{peer.url}/api/v1/conversations/{conversation}/turns"
    headers = {**peer.headers, "Accept": "text/event-stream"} if one_request else peer.headers
    busy: collections.Counter[str] = collections.Counter()
    for _attempt in range(SUBMIT_RETRIES + 1):
        started = time.perf_counter()
        async with client.stream("POST", url, json={"content": "hi"}, headers=headers) as response:
            if response.headers.get("content-type", "").startswith("text/event-stream"):
                seen = await read_run(response, started)
                seen.busy = busy
                return seen
            body = await response.aread()
        code = _code(body)
        if response.status_code != 409 or code not in BUSY_CODES:
            break
        busy[code] += 1
        await asyncio.sleep(0.01)
    if response.status_code != 202:
        return RunRead(failure=f"submit {response.status_code} {code}", busy=busy)
    seen = await watch_run(client, peer, json.loads(body)["run_id"], started)
    seen.busy = busy
    if one_request:
        seen.ttft = None
    return seen


# --- phases -----------------------------------------------------------------------------------


#: The client drops a connection idle this long, before the servers do (uvicorn: 5 s, as
#: httpx's default): reusing one just as the server closes it fails the request
#: (``RemoteProtocolError``), a race a slow machine's pauses between phases made real.
CLIENT_KEEPALIVE_S = 2.0


def async_client(connections: int, timeout: float = 120) -> httpx.AsyncClient:
    limits = httpx.Limits(
        max_connections=connections,
        max_keepalive_connections=connections,
        keepalive_expiry=CLIENT_KEEPALIVE_S,
    )
    return httpx.AsyncClient(timeout=timeout, limits=limits)


async def new_conversations(client: httpx.AsyncClient, peer: Peer, count: int) -> list[str]:
    """``count`` conversations (not timed), created ten at a time."""
    ids: list[str] = []
    while len(ids) < count:
        batch = await asyncio.gather(
            *(
                client.post(
                    f"{peer.url}/api/v1/conversations",
                    headers=peer.headers,
                    json={"title": "bench", "profile_id": peer.profile_id},
                )
                for _ in range(min(10, count - len(ids)))
            )
        )
        for response in batch:
            response.raise_for_status()
            ids.append(str(response.json()["id"]))
    return ids


async def _turn(
    client: httpx.AsyncClient, peer: Peer, conversation: str, one_request: bool, result: Load
) -> tuple[float, float] | str:
    """One turn's TTFT (-1: none measured) and longest wait between deltas, or why it
    failed."""
    if peer.kind == "openai":
        deltas = await openai_turn(client, peer)
        if deltas is None or deltas.ttft is None:
            return "no content"
        return deltas.ttft, deltas.gap
    seen = await chatmem_turn(client, peer, conversation, one_request=one_request)
    result.retried += bool(seen.busy)
    result.busy.update(seen.busy)
    if seen.failure:
        return seen.failure
    if not seen.done:
        return "no done event"
    if seen.text != REPLY:
        return "text differs"
    return (seen.ttft if seen.ttft is not None else -1.0), seen.gap


async def timed_turn(
    client: httpx.AsyncClient,
    peer: Peer,
    conversation: str,
    result: Load,
    *,
    one_request: bool = False,
) -> None:
    """One turn (``conversation``: chatmem's), recorded in ``result``."""
    try:
        outcome = await _turn(client, peer, conversation, one_request, result)
    except httpx.HTTPError as exc:
        outcome = type(exc).__name__
    if isinstance(outcome, str):
        result.errors += 1
        result.reasons[outcome] += 1
        return
    result.completed += 1
    ttft, gap = outcome
    if ttft >= 0:
        result.ttfts.append(ttft)
        result.gaps.append(gap)


async def load(peer: Peer, clients: int, turns_each: int) -> Load:
    """``clients`` concurrent streams, each doing ``turns_each`` turns one after another
    (chatmem: each client in its own conversation, on the one-request path when the server
    has it)."""
    result = Load()
    async with async_client(clients + 10) as client:
        conversations = [""] * clients
        if peer.kind == "chatmem":
            conversations = await new_conversations(client, peer, clients)

        # chatmem: the one-request path when the server has it (as for the TTFT bar).
        one_request = peer.figures.one_request_path

        async def worker(conversation: str) -> None:
            for _ in range(turns_each):
                await timed_turn(client, peer, conversation, result, one_request=one_request)

        started = time.perf_counter()
        await asyncio.gather(*(worker(c) for c in conversations))
        result.elapsed = time.perf_counter() - started
    return result


async def interleaved_ttft(peers: list[Peer], turns: int) -> None:
    """``turns`` sequential turns at every peer, the peers taking turns round by round, so
    the machine's other load falls on all of them alike.  chatmem: a fresh conversation per
    turn (as a first message), and the one-request path beside the usual one when the
    server has it.  The first ``WARM_UP`` rounds are not counted."""
    async with contextlib.AsyncExitStack() as stack:
        clients = {p.key: await stack.enter_async_context(async_client(4)) for p in peers}
        fresh: dict[str, list[str]] = {}

        async def prepare(peer: Peer) -> None:
            """chatmem: probes the one-request path, creates the conversations."""
            client = clients[peer.key]
            probe = Load()
            (first,) = await new_conversations(client, peer, 1)
            await timed_turn(client, peer, first, probe, one_request=True)
            peer.figures.one_request_path = bool(probe.ttfts)
            paths = 2 if peer.figures.one_request_path else 1
            fresh[peer.key] = await new_conversations(client, peer, paths * (WARM_UP + turns))
            if peer.figures.one_request_path:
                peer.figures.ttft_one_request = Load()

        for peer in peers:
            peer.figures.ttft = Load()
            if peer.kind == "chatmem":
                await guarded(peer, prepare(peer))
        taking_part = [p for p in peers if p.failed is None]
        for round_ in range(WARM_UP + turns):
            for peer in taking_part:
                client, figures = clients[peer.key], peer.figures
                counted = round_ >= WARM_UP
                conversation = fresh[peer.key].pop() if peer.key in fresh else ""
                assert figures.ttft is not None
                await timed_turn(client, peer, conversation, figures.ttft if counted else Load())
                if figures.ttft_one_request is not None:
                    target = figures.ttft_one_request if counted else Load()
                    conversation = fresh[peer.key].pop()
                    await timed_turn(client, peer, conversation, target, one_request=True)


@dataclass
class Observed:
    """A phase's result with what it cost: the server's peak RSS and CPU time, and the CPU
    time this client process spent (near 1 s per second: the client is the limit)."""

    load: Load
    rss_peak: float | None
    server_cpu: float | None
    client_cpu: float


async def observed(pid: int | None, phase: Awaitable[Load]) -> Observed:
    """Runs ``phase`` while sampling the peer's RSS; also measures CPU on both sides."""
    peak: float | None = None
    server_before, client_before = cpu_seconds(pid), time.process_time()
    stop = asyncio.Event()

    async def sample() -> None:
        nonlocal peak
        while not stop.is_set():
            current = rss_mb(pid)
            if current is not None:
                peak = max(peak or 0.0, current)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 0.2)

    sampler = asyncio.create_task(sample())
    try:
        result = await phase
    finally:
        stop.set()
        await sampler
    client = time.process_time() - client_before
    server_after = cpu_seconds(pid)
    server = None
    if server_before is not None and server_after is not None:
        server = server_after - server_before
    return Observed(result, peak, server, client)


async def burst_creates(peer: Peer, count: int) -> None:
    """``count`` concurrent ``POST /api/v1/conversations``: 5xx, unanswered, p99."""
    async with async_client(count + 10, timeout=CREATE_TIMEOUT) as client:

        async def one() -> tuple[int, float]:
            started = time.perf_counter()
            try:
                response = await client.post(
                    f"{peer.url}/api/v1/conversations",
                    headers=peer.headers,
                    json={"title": "burst", "profile_id": peer.profile_id},
                )
                status = response.status_code
            except httpx.HTTPError:
                status = 0
            return status, time.perf_counter() - started

        results = await asyncio.gather(*(one() for _ in range(count)))
    figures = peer.figures
    figures.creates_5xx = sum(1 for status, _ in results if status >= 500)
    figures.creates_failed = sum(1 for status, _ in results if status == 0)
    figures.creates_p99 = statistics.quantiles([latency for _, latency in results], n=100)[98]
    statuses = collections.Counter(str(status or "no answer") for status, _ in results)
    figures.creates_statuses = ", ".join(f"{n}× {s}" for s, n in sorted(statuses.items()))


async def watchers(peer: Peer, model: RemoteModelServer, runs: int, each: int) -> tuple[bool, str]:
    """``runs`` slow turns, ``each`` SSE watchers on every one of them."""
    async with async_client(runs + 10) as client:
        conversations = await new_conversations(client, peer, runs)
        for _ in range(runs):  # the next chat requests the provider gets are these turns'
            model.reply(REPLY, delay=SLOW_DELAY)
        started = time.perf_counter()
        submits = await asyncio.gather(
            *(
                client.post(
                    f"{peer.url}/api/v1/conversations/{cid}/turns",
                    headers=peer.headers,
                    json={"content": "watch"},
                )
                for cid in conversations
            )
        )
        run_ids = [r.json()["run_id"] for r in submits if r.status_code == 202]
    # The watchers come on new connections, from a client of their own.  Sent from the
    # submits' client, a few of them went out on a connection kept alive from a submit, and
    # 3 of 1,000 once failed (``RemoteProtocolError: Server disconnected without sending a
    # response``): this one process starting 1,000 requests at once is slow enough that such
    # a request can leave more than uvicorn's 5 s keep-alive after the submit's answer, when
    # the server closes the connection.
    async with async_client(runs * each + 50) as client:

        async def one(run_id: str) -> RunRead:
            try:
                return await watch_run(client, peer, run_id, started)
            except httpx.HTTPError as exc:
                return RunRead(failure=f"{type(exc).__name__}: {exc}")

        seen = await asyncio.gather(*(one(run_id) for run_id in run_ids for _ in range(each)))
        elapsed = time.perf_counter() - started
    done = sum(1 for s in seen if s.done)
    same = sum(1 for s in seen if s.done and s.text == REPLY)
    total = runs * each
    ok = len(run_ids) == runs and same == total
    why = collections.Counter(
        s.failure or ("no done event" if not s.done else "text differs")
        for s in seen
        if not (s.done and s.text == REPLY)
    )
    if len(run_ids) < runs:
        why[f"{runs - len(run_ids)} submits refused"] += 1
    missed = f" (missed: {', '.join(f'{n}× {r}' for r, n in why.most_common())})" if why else ""
    return ok, f"{done}/{total} done, {same} same text, {elapsed:.1f} s{missed}"


async def streams(peer: Peer, sizes: Sizes) -> None:
    """turns/s at 1 and 10 streams; 100 streams with TTFT, RSS and CPU."""
    figures = peer.figures
    figures.one = await load(peer, 1, sizes.one_stream)
    figures.ten = await load(peer, 10, sizes.ten_streams)
    seen = await observed(peer.pid, load(peer, 100, sizes.hundred_streams))
    figures.hundred, figures.rss_100 = seen.load, seen.rss_peak
    if seen.server_cpu is not None and seen.load.completed:
        figures.cpu_per_turn = seen.server_cpu / seen.load.completed
    figures.client_cpu = seen.client_cpu / seen.load.elapsed if seen.load.elapsed else None


async def bursts(peer: Peer, model: RemoteModelServer, sizes: Sizes) -> None:
    """chatmem only: 1,000 watchers, then 200 concurrent creates (last: a burst that wedges
    the server must not take the other figures with it)."""
    figures = peer.figures
    figures.watchers_ok, figures.watchers = await watchers(
        peer, model, sizes.watched_runs, sizes.watchers_per_run
    )
    await burst_creates(peer, sizes.creates)


async def guarded(peer: Peer, phase: Awaitable[None]) -> None:
    """Runs a phase; when it breaks off, the figures so far stand and the peer says why."""
    try:
        await phase
    except Exception as exc:
        peer.failed = f"{type(exc).__name__}: {str(exc)[:200]}"
        print(f"{peer.name}: broke off — {peer.failed}", flush=True)


# --- the table and the bars ------------------------------------------------------------------


def _ms(value: float | None) -> str:
    return "—" if value is None else f"{value * 1000:.1f}"


def _rate(phase: Load | None) -> str:
    if phase is None:
        return "—"
    errors = f" ({phase.errors} err)" if phase.errors else ""
    return f"{phase.turns_per_s:.1f}{errors}"


def _gap(phase: Load | None, quantile: float) -> str:
    return _ms(phase.gap(quantile) if phase is not None else None)


def _overhead(phase: Load | None, direct: Peer) -> float | None:
    base = direct.figures.ttft
    if phase is None or phase.ttft_p50 is None or base is None or base.ttft_p50 is None:
        return None
    return phase.ttft_p50 - base.ttft_p50


ROWS: list[tuple[str, Callable[[Peer, Peer], str]]] = [
    ("TTFT p50, 1 stream (ms)", lambda p, d: _ms(p.figures.ttft and p.figures.ttft.ttft_p50)),
    (
        "TTFT overhead p50 (ms)",
        lambda p, d: "—" if p is d else _ms(_overhead(p.figures.ttft, d)),
    ),
    (
        "  chatmem, one request (ms)",
        lambda p, d: (
            "n/a"
            if p.kind == "chatmem" and not p.figures.one_request_path
            else _ms(_overhead(p.figures.ttft_one_request, d))
        ),
    ),
    ("turns/s, 1 stream", lambda p, d: _rate(p.figures.one)),
    ("turns/s, 10 streams", lambda p, d: _rate(p.figures.ten)),
    (
        "100 streams: TTFT p50 (ms)",
        lambda p, d: _ms(p.figures.hundred and p.figures.hundred.ttft_p50),
    ),
    ("100 streams: turns/s", lambda p, d: _rate(p.figures.hundred)),
    ("100 streams: longest stall p50 (ms)", lambda p, d: _gap(p.figures.hundred, 0.5)),
    ("100 streams: longest stall p99 (ms)", lambda p, d: _gap(p.figures.hundred, 0.99)),
    ("100 streams: server CPU ms/turn", lambda p, d: _ms(p.figures.cpu_per_turn)),
    ("100 streams: client CPU %", lambda p, d: _percent(p.figures.client_cpu)),
    ("200 creates: 5xx / p99 (ms)", lambda p, d: _creates(p.figures)),
    ("RSS idle (MB)", lambda p, d: _mb(p.figures.rss_idle)),
    ("RSS at 100 streams (MB)", lambda p, d: _mb(p.figures.rss_100)),
]


def _creates(f: Figures) -> str:
    if f.creates_5xx is None or f.creates_p99 is None:
        return "—"
    unanswered = f" (+{f.creates_failed} unanswered)" if f.creates_failed else ""
    return f"{f.creates_5xx}{unanswered} / {f.creates_p99 * 1000:.0f}"


def _percent(value: float | None) -> str:
    return "—" if value is None else f"{value * 100:.0f}"


def _mb(value: float | None) -> str:
    return "—" if value is None else f"{value:.0f}"


def print_table(direct: Peer, peers: list[Peer]) -> None:
    shown = [direct, *(p for p in peers if p.skipped is None)]
    cells = [[label, *(render(p, direct) for p in shown)] for label, render in ROWS]
    header = ["", *(p.name for p in shown)]
    widths = [max(len(row[i]) for row in [header, *cells]) for i in range(len(header))]
    for row in [header, *cells]:
        print(
            "  ".join(
                cell.ljust(widths[0]) if i == 0 else cell.rjust(widths[i])
                for i, cell in enumerate(row)
            )
        )
    for peer in shown:
        for line in notes(peer):
            print(f"{peer.name}: {line}")
    for peer in peers:
        if peer.skipped is not None:
            print(f"{peer.name}: skipped — {peer.skipped}")


def notes(peer: Peer) -> Iterator[str]:
    """What the table cannot show: why turns failed, the creates' statuses, the watchers."""
    f = peer.figures
    phases = {
        "1 stream (TTFT)": f.ttft,
        "one-request path": f.ttft_one_request,
        "1 stream": f.one,
        "10 streams": f.ten,
        "100 streams": f.hundred,
    }
    for label, phase in phases.items():
        if phase is not None and phase.reasons:
            reasons = ", ".join(f"{n}× {r}" for r, n in phase.reasons.most_common())
            yield f"{label}: {phase.errors} failed turns ({reasons})"
        if phase is not None and phase.retried:
            codes = ", ".join(f"{n}× {c}" for c, n in phase.busy.most_common())
            yield (
                f"{label}: {phase.retried} submits answered 409 right after the previous "
                f"turn's done, retried every 10 ms ({codes})"
            )
    if f.watchers:
        yield f"1,000 SSE watchers: {f.watchers}"
    if f.creates_statuses:
        yield f"200 creates: {f.creates_statuses}"
    if peer.failed:
        yield f"broke off: {peer.failed}"


def overhead_bar(peer: Peer, bare: Peer, direct: Peer) -> list[tuple[bool, str]]:
    """TTFT overhead p50 ≤ 2× the bare proxy's, on chatmem's faster path: the one-request
    path when the server has it (the submit-then-events path is named beside it)."""
    two = _overhead(peer.figures.ttft, direct)
    one = _overhead(peer.figures.ttft_one_request, direct)
    own = min(x for x in (one, two) if x is not None) if (one, two) != (None, None) else None
    if own is None:
        return [(False, f"{peer.name} TTFT overhead: not measured")]
    limit = OVERHEAD_FACTOR * (_overhead(bare.figures.ttft, direct) or 0.0)
    path = "submit + events" if own == two else "one request"
    other = ""
    if one is not None and two is not None:
        other_path, other_value = ("one request", one) if own == two else ("submit + events", two)
        other = f"; {other_path} {other_value * 1000:.2f} ms"
    return [
        (
            own <= limit,
            f"{peer.name} TTFT overhead p50 {own * 1000:.2f} ms ({path}{other}) ≤ "
            f"{OVERHEAD_FACTOR:g}× bare proxy's ({limit * 1000:.2f} ms)",
        )
    ]


def check_bars(direct: Peer, peers: list[Peer]) -> list[str]:
    """Prints a PASS/FAIL line per bar; answers the failed ones."""
    ran = {p.key: p for p in peers if p.skipped is None}
    bare, litellm = ran.get("bare"), ran.get("litellm")
    results: list[tuple[bool, str]] = []
    for key in ("sqlite", "postgresql"):
        peer = ran.get(key)
        if peer is None:
            continue
        f = peer.figures
        if bare is not None:
            results.extend(overhead_bar(peer, bare, direct))
        hundred = f.hundred
        p50 = hundred.ttft_p50 if hundred else None
        results.append(
            (
                p50 is not None
                and p50 <= C100_TTFT_BAR
                and hundred is not None
                and not hundred.errors,
                f"{peer.name} 100 streams TTFT p50 {_ms(p50)} ms ≤ {C100_TTFT_BAR * 1000:.0f} ms"
                f"{f' ({hundred.errors} failed turns)' if hundred and hundred.errors else ''}",
            )
        )
        if litellm is not None and litellm.figures.hundred and hundred:
            theirs = litellm.figures.hundred.turns_per_s
            results.append(
                (
                    hundred.turns_per_s >= C100_LITELLM_FACTOR * theirs,
                    f"{peer.name} 100 streams {hundred.turns_per_s:.1f} turns/s ≥ "
                    f"{C100_LITELLM_FACTOR:g}× LiteLLM's ({C100_LITELLM_FACTOR * theirs:.1f})",
                )
            )
        if f.creates_5xx is not None and f.creates_p99 is not None:
            results.append(
                (
                    f.creates_5xx == 0
                    and f.creates_failed == 0
                    and f.creates_p99 <= CREATE_P99_BAR,
                    f"{peer.name} 200 concurrent creates: {f.creates_5xx} 5xx, "
                    f"{f.creates_failed} unanswered, p99 {f.creates_p99 * 1000:.0f} ms "
                    f"(bar 0, ≤ {CREATE_P99_BAR * 1000:.0f} ms)",
                )
            )
        if f.watchers_ok is not None:
            results.append((f.watchers_ok, f"{peer.name} 1,000 watchers: {f.watchers}"))
        if peer.failed:
            results.append((False, f"{peer.name} broke off: {peer.failed}"))
    for ok, line in results:
        print(f"{'PASS' if ok else 'FAIL'}: {line}")
    return [line for ok, line in results if not ok]


# --- main ----------------------------------------------------------------------------------


PEERS: dict[str, tuple[str, Callable[..., contextlib.AbstractContextManager[Peer]]]] = {
    "bare": ("bare proxy", lambda model, tmp: bare_proxy(model, tmp)),
    "litellm": ("LiteLLM", lambda model, tmp: litellm_proxy(model, tmp)),
    "sqlite": ("chatmem/SQLite", lambda model, tmp: chatmem_serve("sqlite", model, tmp)),
    "postgresql": ("chatmem/PostgreSQL", lambda model, tmp: postgres_chatmem(model, tmp)),
}


@contextlib.contextmanager
def postgres_chatmem(model: RemoteModelServer, tmp: Path) -> Iterator[Peer]:
    with postgres_database() as url, chatmem_serve("postgresql", model, tmp, url) as peer:
        yield peer


def start_peer(key: str, model: RemoteModelServer, tmp: Path) -> Peer:
    name, start = PEERS[key]
    print(f"-- starting {name}", flush=True)
    stack = contextlib.ExitStack()
    try:
        peer = stack.enter_context(start(model, tmp))
    except PeerFailed as exc:
        stack.close()
        print(f"{name}: skipped — {exc}", flush=True)
        return Peer(key, name, "", skipped=str(exc))
    peer.stack = stack
    if peer.figures.rss_idle is None:
        peer.figures.rss_idle = rss_mb(peer.pid)
    return peer


async def run_all(peers: list[Peer], model: RemoteModelServer, sizes: Sizes) -> None:
    """The phases in order, each peer alone in each but the first (the provider first)."""
    print("-- TTFT, one stream at a time, the peers taking turns", flush=True)
    gc.collect()
    await interleaved_ttft(peers, sizes.sequential)
    for peer in peers:
        if peer.failed is None:
            print(f"-- {peer.name}: 1, 10 and 100 streams", flush=True)
            model.reset()
            gc.collect()
            await guarded(peer, streams(peer, sizes))
    for peer in peers:
        if peer.kind == "chatmem" and peer.failed is None:
            print(f"-- {peer.name}: 1,000 watchers, 200 creates", flush=True)
            model.reset()
            gc.collect()
            await guarded(peer, bursts(peer, model, sizes))
        peer.stop()


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Side-by-side load benchmark (issue 12).")
    parser.add_argument("--quick", action="store_true", help="fewer iterations")
    parser.add_argument(
        "--only",
        default=",".join(PEER_KEYS),
        help=f"comma-separated peers among {', '.join(PEER_KEYS)} (the provider always runs)",
    )
    args = parser.parse_args(argv)
    args.only = [k.strip() for k in args.only.split(",") if k.strip()]
    unknown = set(args.only) - set(PEER_KEYS)
    if unknown:
        parser.error(f"unknown peer(s): {', '.join(sorted(unknown))}")
    return args


async def main_async(args: argparse.Namespace) -> int:
    sizes = QUICK if args.quick else Sizes()
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp_name, provider_process() as (model, pid):
        model.set_default_reply(REPLY)
        direct = Peer("provider", "provider (direct)", "openai", model.base_url, pid)
        direct.figures.rss_idle = rss_mb(pid)
        peers = [start_peer(key, model, Path(tmp_name)) for key in args.only]
        try:
            await run_all([direct, *(p for p in peers if p.skipped is None)], model, sizes)
        finally:
            for peer in peers:
                peer.stop()
    load_after = os.getloadavg()
    print()
    print(
        f"machine: {os.cpu_count()} CPUs; load average before "
        f"{' '.join(f'{x:.2f}' for x in load_before)}, after "
        f"{' '.join(f'{x:.2f}' for x in load_after)}; "
        f"{sizes.sequential} sequential turns for TTFT, 100 streams × {sizes.hundred_streams} "
        f"turns; reply of 20 deltas"
    )
    if max(load_before[0], load_after[0]) > (os.cpu_count() or 1):
        print(
            "note: the machine was busy (load average above its CPU count): absolute figures "
            "are noisy; the TTFT rows, measured with the peers taking turns, compare best"
        )
    print_table(direct, peers)
    failures = check_bars(direct, peers)
    return 1 if failures else 0


def main() -> int:
    gc.disable()  # collected between phases (``run_all``); see the module's docstring
    try:
        return asyncio.run(main_async(parse_args(sys.argv[1:])))
    finally:
        gc.enable()


if __name__ == "__main__":
    sys.exit(main())
