"""OPS-4, SCALE-2: the committed deployment files, run as a team would run them, on loopback.

nginx (Debian's package) serves ``deploy/nginx/chatmem.conf`` — only its upstream servers,
listen ports and certificate paths rewritten (:mod:`tests.support.nginx`) — over TLS in front
of two ``chatmem serve`` replicas started with ``deploy/chatmem.env``'s settings (the
machine-specific ones pointed at loopback: a PostgreSQL database of their own, Redis, a
fresh shared key), and the fake model server, which streams the first words of an answer
and then holds it until the test releases it: the turn is still running while the test acts
on it, and what reached the client by then was not held back by nginx.  ``X-Chatmem-Upstream`` (added by the test's own main config)
names the replica nginx chose, so the test can go to the *other* one directly.

Checked, waiting only on what the servers send (events, statuses, ready probes):

- a turn streams through nginx event by event while it runs, is watched and stopped through
  the other replica, and both streams end ``stopped``;
- the replica running a turn is killed (SIGKILL): a watcher on the other replica gets the
  run's terminal ``error`` event (``interrupted``, TURN-3), and new turns through nginx
  succeed, nginx going on to the survivor;
- behind TLS chatmem sees https (``X-Forwarded-Proto`` from a trusted proxy), plain HTTP is
  sent to https, and a body over the bound gets the CONTRACT's 413, from nginx itself.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from tests.conftest import skip_or_fail
from tests.support.deployment import ENV_FILE, Nginx, env_values, nginx_binary, upstream
from tests.support.model_server import RemoteModelServer
from tests.support.serve import ServeProcess, fake_profile, model_server_process
from tests.support.served import postgres_database
from tests.turns.conftest import SseParser

from chatmem.security.secret_box import encode_key, new_key

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.slow]

REDIS_URL = "redis://127.0.0.1:6379/0"
#: The long answer: its first :data:`SHOWN` words stream, the rest waits for ``release()``.
LONG = " ".join(f"word{i}" for i in range(600))
SHOWN = 3
#: A failure bound (a run that never ends), not a wait: the streams end in seconds.
STREAM_DEADLINE = 180.0
#: A dead replica is noticed after three silent heartbeats (the file's default is 5 s).
HEARTBEAT = "0.3"


def _replica_env(public_url: str, database_url: str) -> dict[str, str]:
    """``deploy/chatmem.env``'s settings, the machine-specific ones pointed at loopback."""
    env = env_values(ENV_FILE.read_text(encoding="utf-8"))
    env.pop("CHATMEM_STATE_DIR")  # one state folder per replica (ServeProcess)
    loopback = {
        "CHATMEM_DATABASE_URL": database_url,
        "CHATMEM_REDIS_URL": REDIS_URL,
        "CHATMEM_ENCRYPTION_KEY": encode_key(new_key()),
        "CHATMEM_HOST": "127.0.0.1",
        "CHATMEM_PUBLIC_URL": public_url,
        "CHATMEM_TRUSTED_PROXIES": "127.0.0.1",
    }
    assert set(loopback) <= set(env), "the env file should set what a replica needs"
    return {**env, **loopback, "CHATMEM_REPLICA_HEARTBEAT": HEARTBEAT}


@dataclass
class Deployment:
    nginx: Nginx
    replicas: dict[int, ServeProcess]  # by port
    model: RemoteModelServer
    token: str
    profile_id: str

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    def edge(self) -> httpx.Client:
        """A client of nginx (https), signed in."""
        return httpx.Client(
            base_url=self.nginx.url, headers=self.headers, verify=self.nginx.tls(), timeout=60
        )

    def direct(self, port: int) -> httpx.Client:
        """A client of one replica, bypassing nginx."""
        return httpx.Client(base_url=self.replicas[port].url, headers=self.headers, timeout=60)

    def other(self, port: int) -> int:
        (other,) = set(self.replicas) - {port}
        return other

    def conversation(self, client: httpx.Client) -> str:
        made = client.post(
            "/api/v1/conversations", json={"title": "deployed", "profile_id": self.profile_id}
        )
        assert made.status_code == 201, made.text
        return str(made.json()["id"])


def _redis_reachable() -> None:
    import redis

    try:
        redis.Redis.from_url(REDIS_URL).ping()
    except redis.RedisError as exc:
        skip_or_fail(f"Redis unreachable at {REDIS_URL}: {type(exc).__name__}")


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    if nginx_binary() is None:
        skip_or_fail("nginx is not installed (Debian: apt-get install nginx)")
    _redis_reachable()
    folder = tmp_path_factory.mktemp("deployment")
    with ExitStack() as stack:
        database_url = stack.enter_context(postgres_database())
        model = stack.enter_context(model_server_process())
        model.set_default_reply("Fine.")
        # The ports first: nginx's address is the replicas' public URL, theirs its upstream.
        one, two = (ServeProcess(folder / name) for name in ("one", "two"))
        nginx = Nginx(folder / "nginx", [one.port, two.port])
        env = _replica_env(nginx.url, database_url)
        for replica in (one, two):
            replica.extra_env = env
            stack.callback(replica.stop)
            # One after the other, as docs/deployment.md says: the first migrates the database.
            replica.start()
        stack.callback(nginx.stop)
        nginx.start()
        with one.signed_in("deployer") as api:
            token = str(api.headers["Authorization"]).removeprefix("Bearer ")
            profile_id = fake_profile(api, model.base_url)
        yield Deployment(nginx, {one.port: one, two.port: two}, model, token, profile_id)


def _events(response: httpx.Response) -> Iterator[dict[str, Any]]:
    """The SSE events of a streamed response, one at a time as they arrive.  Keep-alive
    comments reset the client's read timeout, so a stream that never ends fails here, at
    :data:`STREAM_DEADLINE`."""
    assert response.status_code == 200, response.read()
    parser = SseParser()
    deadline = time.monotonic() + STREAM_DEADLINE
    for line in response.iter_lines():
        assert time.monotonic() < deadline, "the stream did not end"
        event = parser.feed(line)
        if event is not None:
            yield event


def _deltas(events: Iterator[dict[str, Any]], count: int) -> list[dict[str, Any]]:
    """The next ``count`` deltas of a run's events (other events skipped)."""
    return [next(e for e in events if e["event"] == "delta") for _ in range(count)]


def _until_end(events: Iterator[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rest of a run's events, through its terminal one."""
    rest = []
    for event in events:
        rest.append(event)
        if event["event"] in ("done", "error"):
            break
    return rest


def _status(client: httpx.Client, run_id: str) -> str:
    answer = client.get(f"/api/v1/runs/{run_id}")
    assert answer.status_code == 200, answer.text
    return str(answer.json()["status"])


def test_a_turn_streams_through_nginx_and_is_stopped_through_the_other_replica_OPS_4(
    deployment: Deployment,
) -> None:
    d = deployment
    with d.edge() as edge, ExitStack() as held:
        held.callback(d.model.release)  # the model's side of the stream ends too
        cid = d.conversation(edge)
        d.model.reply(LONG, hold_after=SHOWN)
        with edge.stream(
            "POST",
            f"/api/v1/conversations/{cid}/turns",
            json={"content": "A long story"},
            headers={"Accept": "text/event-stream"},
        ) as response:
            run_id = response.headers["X-Chatmem-Run-Id"]
            owner = upstream(response)
            streamed = _events(response)
            with d.direct(d.other(owner)) as other:
                # The words streamed so far reach the client while the model holds the rest
                # (had nginx buffered them, this would wait until the client's read timeout).
                deltas = _deltas(streamed, SHOWN)
                assert _status(other, run_id) == "running"
                assert [e["data"]["text"].strip() for e in deltas] == ["word0", "word1", "word2"]
                # Watched on the replica that does not run it: live events, through Redis.
                with other.stream("GET", f"/api/v1/runs/{run_id}/events") as watched:
                    watching = _events(watched)
                    assert [e["data"]["text"] for e in _deltas(watching, SHOWN)] == [
                        e["data"]["text"] for e in deltas
                    ]
                    stopped = other.post(f"/api/v1/runs/{run_id}/stop")
                    assert stopped.status_code == 200, stopped.text
                    assert stopped.json()["status"] == "stopped"
                    watcher_end = _until_end(watching)[-1]
            edge_end = _until_end(streamed)[-1]
    for end in (watcher_end, edge_end):
        assert end["event"] == "done" and end["data"]["status"] == "stopped", end


def test_a_replica_killed_mid_turn_ends_its_run_for_watchers_and_nginx_goes_on_OPS_4(
    deployment: Deployment,
) -> None:
    d = deployment
    with d.edge() as edge:
        cid = d.conversation(edge)
        d.model.reply(LONG, hold_after=SHOWN)
        submitted = edge.post(f"/api/v1/conversations/{cid}/turns", json={"content": "Long"})
        assert submitted.status_code == 202, submitted.text
        run_id, owner = submitted.json()["run_id"], upstream(submitted)
        survivor = d.other(owner)
        try:
            with d.direct(survivor) as other:
                with other.stream("GET", f"/api/v1/runs/{run_id}/events") as watched:
                    watching = _events(watched)
                    assert len(_deltas(watching, SHOWN)) == SHOWN
                    d.replicas[owner].kill()  # SIGKILL, mid-answer
                    # The survivor notices the silent heartbeat and ends the run (TURN-3).
                    end = _until_end(watching)[-1]
                assert end["event"] == "error" and end["data"]["code"] == "interrupted", end
                assert _status(other, run_id) == "interrupted"
            # New turns through nginx: every one answered (by the survivor), none refused.
            for n in range(4):
                fresh = d.conversation(edge)
                turn = edge.post(f"/api/v1/conversations/{fresh}/turns", json={"content": f"{n}"})
                assert turn.status_code == 202, turn.text
                assert upstream(turn) == survivor
                with edge.stream("GET", f"/api/v1/runs/{turn.json()['run_id']}/events") as r:
                    assert _until_end(_events(r))[-1]["data"]["status"] == "completed"
        finally:
            d.model.release()
            replica = d.replicas[owner]
            if replica.proc is not None and replica.proc.poll() is not None:
                replica.start()  # whole again for the other tests (recovery at start)


def test_behind_tls_chatmem_sees_https_and_nginx_keeps_chatmems_errors_OPS_4(
    deployment: Deployment,
) -> None:
    d = deployment
    with d.edge() as edge:
        # X-Forwarded-Proto from a trusted proxy: the app frame's policy names this origin.
        sandbox = edge.get("/apps/sandbox")
        assert sandbox.status_code == 200
        assert (
            f"https://127.0.0.1:{d.nginx.https_port}/" in sandbox.headers["content-security-policy"]
        )
        # CHATMEM_SECURE_COOKIES=1 (the env file): browsers are told to stay on https.
        assert "max-age=" in sandbox.headers["strict-transport-security"]
        # A body over CHATMEM_MAX_BODY_BYTES: refused by nginx, in chatmem's shape.
        too_big = edge.post(
            "/api/v1/conversations",
            content=b" " * (8 * 1024 * 1024 + 1),
            headers={"Content-Type": "application/json"},
        )
        assert too_big.status_code == 413
        assert too_big.json()["error"]["code"] == "payload_too_large"
    plain = httpx.get(f"http://127.0.0.1:{d.nginx.http_port}/c/x?y=1")
    assert plain.status_code == 301
    assert plain.headers["location"] == "https://127.0.0.1/c/x?y=1"
