"""SEC-2: sign-in is throttled per name and per client address (429 ``rate_limited`` with
``Retry-After``, exponential back-off, shared through Redis), costs the same for unknown and
known names, and holds no database write lock while the password is hashed."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from argon2 import extract_parameters
from fastapi import FastAPI
from fastapi.testclient import TestClient
from tests.conftest import skip_or_fail
from tests.support.app import make_user

from chatmem.auth.throttle import (
    MemoryThrottle,
    RedisThrottle,
    SigninThrottled,
    ThrottlePolicy,
    TrustedProxies,
    address_key,
    name_key,
)
from chatmem.security import passwords as auth_secrets
from chatmem.settings import Settings
from chatmem.web.app import create_app

REDIS_URL = "redis://127.0.0.1:6379/0"
PASSWORD = "correct horse battery staple"
LOGIN = "/api/v1/auth/login"
SQLITE = pytest.mark.parametrize("backend", ["sqlite"])  # the counting knows no backend


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(app: FastAPI) -> Clock:
    return Clock()


@pytest.fixture
def throttled(client: TestClient, clock: Clock) -> TestClient:
    """The app's client, its sign-in throttle on a clock the test moves."""
    client.app.state.signin_throttle = MemoryThrottle(ThrottlePolicy(), clock=clock)  # type: ignore[attr-defined]
    return client


def login(client: TestClient, name: str, password: str, **headers: str) -> Any:
    return client.post(LOGIN, json={"name": name, "password": password}, headers=headers)


def test_41_wrong_passwords_end_in_429_with_retry_after(
    throttled: TestClient, clock: Clock
) -> None:
    make_user(throttled, "carol", password=PASSWORD)
    answers = [login(throttled, "carol", f"guess {i}") for i in range(41)]
    statuses = [a.status_code for a in answers]
    assert statuses[:5] == [401] * 5  # the first failures cost nothing
    assert statuses.count(429) >= 30, statuses
    refused = answers[-1]
    assert refused.status_code == 429
    assert refused.json()["error"]["code"] == "rate_limited"
    retry_after = int(refused.headers["Retry-After"])
    assert retry_after >= 1 and refused.json()["error"]["retry_after"] == retry_after

    # Backing off refuses the right password too (it is not even checked) …
    assert login(throttled, "carol", PASSWORD).status_code == 429
    # … until the wait is over; then it signs in and the name's count starts afresh.
    clock.now += retry_after
    assert login(throttled, "carol", PASSWORD).status_code == 200
    assert [login(throttled, "carol", "bad").status_code for _ in range(5)] == [401] * 5


def test_the_wait_doubles_with_each_failure_and_is_capped(clock: Clock) -> None:
    policy = ThrottlePolicy(per_name=3, per_address=1000, max_delay=60)
    throttle = MemoryThrottle(policy, clock=clock)
    waits = []
    for _ in range(12):
        try:
            throttle.admit_now("carol", "192.0.2.1")
        except SigninThrottled as exc:
            waits.append(exc.retry_after)
            clock.now += exc.retry_after
            throttle.admit_now("carol", "192.0.2.1")
    assert waits == [1, 2, 4, 8, 16, 32, 60, 60]
    # An hour without failures forgets the name.
    clock.now += 60 + 3600
    for _ in range(3):
        throttle.admit_now("carol", "192.0.2.1")


@SQLITE
def test_failures_on_one_name_leave_other_names_alone(throttled: TestClient) -> None:
    make_user(throttled, "carol", password=PASSWORD)
    make_user(throttled, "dave", password=PASSWORD)
    statuses = [login(throttled, "carol", "bad").status_code for _ in range(10)]
    assert statuses[-1] == 429
    # Same address, another name: unaffected by carol's failures.
    assert login(throttled, "dave", PASSWORD).status_code == 200
    # Names that do not exist are counted the same way (the answer tells nothing).
    unknown = [login(throttled, "nobody", "bad").status_code for _ in range(7)]
    assert unknown[:5] == [401] * 5 and unknown[-1] == 429


@SQLITE
def test_an_address_hammering_many_names_is_throttled(app: FastAPI, clock: Clock) -> None:
    with (
        TestClient(app, client=("203.0.113.9", 4000)) as attacker,
        TestClient(app, client=("198.51.100.7", 4000)) as neighbour,
    ):
        # 10 per address instead of 20 keeps the test short (each failure is an argon2 hash).
        app.state.signin_throttle = MemoryThrottle(ThrottlePolicy(per_address=10), clock=clock)
        make_user(attacker, "dave", password=PASSWORD)
        statuses = [login(attacker, f"user{i}", "bad").status_code for i in range(13)]
        assert statuses[:10] == [401] * 10 and statuses[-1] == 429
        # Every name is now refused from that address, dave's right password included …
        assert login(attacker, "dave", PASSWORD).status_code == 429
        # … while dave signs in from elsewhere.
        assert login(neighbour, "dave", PASSWORD).status_code == 200


def test_a_success_takes_back_only_its_own_attempt(clock: Clock) -> None:
    """An attacker signing in to their own account between guesses gains nothing."""
    throttle = MemoryThrottle(ThrottlePolicy(per_name=100, per_address=3), clock=clock)
    for name in ("a", "b", "c"):
        throttle.admit_now(name, "192.0.2.1")
    throttle.succeeded_now(throttle.admit_now("mine", "192.0.2.1"))
    with pytest.raises(SigninThrottled):
        throttle.admit_now("d", "192.0.2.1")
        throttle.admit_now("e", "192.0.2.1")


def test_addresses_behind_trusted_proxies_and_ipv6_networks() -> None:
    proxies = TrustedProxies("127.0.0.1, 10.0.0.0/8")
    assert proxies.client_address("127.0.0.1", "198.51.100.7, 10.1.2.3") == "198.51.100.7"
    # A client cannot choose its address by sending the header itself.
    assert proxies.client_address("198.51.100.7", "1.2.3.4") == "198.51.100.7"
    assert TrustedProxies("").client_address("127.0.0.1", "1.2.3.4") == "127.0.0.1"
    # One IPv6 host usually holds a whole /64: it counts as one address.
    assert address_key("2001:db8:1:2::1") == address_key("2001:db8:1:2:ffff::9")
    assert address_key("::ffff:192.0.2.1") == address_key("192.0.2.1")


def test_unknown_names_cost_one_argon2_verification_with_the_same_parameters(
    client: TestClient, monkeypatch: pytest.MonkeyPatch, backend: str
) -> None:
    """Deterministic timing check: an unknown name (and a user without a password) is
    verified against a dummy hash with the parameters of a real one; and on SQLite the
    write lock is free while the hash runs (a failed sign-in takes no write lock)."""
    make_user(client, "carol", password=PASSWORD)
    make_user(client, "nopassword")
    db = client.app.state.db  # type: ignore[attr-defined]
    real = auth_secrets._hasher
    calls: list[tuple[str, bool]] = []

    class Spy:
        def verify(self, stored: str, password: str) -> bool:
            lock_free = True
            if db.can_write_nowait:
                try:
                    with db.connection_nowait():
                        pass
                except Exception:
                    lock_free = False
            calls.append((stored, lock_free))
            return real.verify(stored, password)

    monkeypatch.setattr(auth_secrets, "_hasher", Spy())
    for name in ("carol", "nobody", "nopassword"):
        assert login(client, name, "wrong").status_code == 401
    assert login(client, "carol", PASSWORD).status_code == 200
    assert len(calls) == 4
    real_hash, dummy, dummy_again, _ = (stored for stored, _ in calls)
    assert dummy == dummy_again != real_hash
    # The dummy hash is made like a real one: same algorithm, cost, memory and parallelism.
    assert extract_parameters(dummy) == extract_parameters(real_hash)
    assert all(lock_free for _, lock_free in calls)


# --- Redis: every replica sees the same counts ------------------------------------------------


async def _redis_or_skip() -> None:
    import redis.asyncio as aioredis

    client = aioredis.from_url(REDIS_URL)
    try:
        await client.ping()
    except Exception as exc:
        skip_or_fail(f"Redis not reachable at {REDIS_URL}: {exc}")
    finally:
        await client.aclose()


@pytest.mark.redis
async def test_redis_throttle_is_shared_by_replicas() -> None:
    await _redis_or_skip()
    clock = Clock()
    prefix = f"chatmem-test-{uuid.uuid4().hex[:8]}:signin:"
    policy = ThrottlePolicy(per_name=3, per_address=5, max_delay=60)
    a = RedisThrottle(REDIS_URL, policy, prefix=prefix, clock=clock)
    b = RedisThrottle(REDIS_URL, policy, prefix=prefix, clock=clock)
    try:
        for replica in (a, b, a):
            await replica.admit("carol", "192.0.2.1")
        await b.admit("carol", "192.0.2.1")  # the 4th failure: 1 s back-off, seen by both
        for replica in (a, b):
            with pytest.raises(SigninThrottled) as refused:
                await replica.admit("carol", "192.0.2.1")
            assert refused.value.retry_after == 1
        clock.now += 1
        ticket = await a.admit("carol", "192.0.2.1")  # 5th: 2 s
        with pytest.raises(SigninThrottled) as refused:
            await b.admit("carol", "192.0.2.1")
        assert refused.value.retry_after == 2
        # The address: 5 attempts counted; a success takes one back and clears the name.
        await b.succeeded(ticket)
        await a.admit("carol", "192.0.2.1")
        await b.admit("dave", "192.0.2.1")  # 6th for the address: 1 s back-off
        with pytest.raises(SigninThrottled):
            await a.admit("erin", "192.0.2.1")
        await a.admit("erin", "198.51.100.7")  # another address is free
        # Parallel guesses are counted atomically: only one of many gets through the 1 s gate.
        clock.now += 1
        results = await asyncio.gather(
            *(a.admit("frank", "192.0.2.1") for _ in range(10)), return_exceptions=True
        )
        assert sum(not isinstance(r, Exception) for r in results) == 1
    finally:
        import redis.asyncio as aioredis

        cleanup = aioredis.from_url(REDIS_URL)
        keys = [k async for k in cleanup.scan_iter(prefix + "*")]
        if keys:
            await cleanup.delete(*keys)
        await cleanup.aclose()
        await a.close()
        await b.close()


_REDIS_NAMES: list[str] = []


@pytest.fixture
def redis_app(settings: Settings) -> Iterator[tuple[TestClient, TestClient]]:
    """Two replicas (two apps) on one database and one Redis."""
    asyncio.run(_redis_or_skip())
    shared = settings.model_copy(update={"redis_url": REDIS_URL})
    # Redis outlives the test: an address (and names) of its own, its keys removed after.
    address = f"test-{uuid.uuid4().hex[:12]}"
    try:
        with (
            TestClient(create_app(shared), client=(address, 5000)) as one,
            TestClient(create_app(shared), client=(address, 5000)) as two,
        ):
            yield one, two
    finally:
        import redis

        cleanup = redis.Redis.from_url(REDIS_URL)
        cleanup.delete(f"chatmem:signin:{address_key(address)}")
        for name in _REDIS_NAMES:
            cleanup.delete(f"chatmem:signin:{name_key(name)}")
        cleanup.close()


@pytest.mark.redis
@pytest.mark.parametrize("backend", ["sqlite"])
def test_with_redis_configured_replicas_share_the_sign_in_counts(
    redis_app: tuple[TestClient, TestClient],
) -> None:
    one, two = redis_app
    for client in (one, two):
        assert isinstance(client.app.state.signin_throttle, RedisThrottle)  # type: ignore[attr-defined]
    name = f"carol{uuid.uuid4().hex[:8]}"  # Redis outlives the test: a name of its own
    _REDIS_NAMES.append(name)
    make_user(one, name, password=PASSWORD)
    statuses = [login(client, name, "bad").status_code for client in (one, two) * 4]
    assert statuses[:5] == [401] * 5 and statuses[-1] == 429, statuses
    refused = login(two, name, PASSWORD)
    assert refused.status_code == 429 and int(refused.headers["Retry-After"]) >= 1
