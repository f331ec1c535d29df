"""Sign-in throttling (SEC-2): per name and per client address, with exponential back-off.

Every sign-in attempt is *admitted* first (:meth:`SigninThrottle.admit`).  Admission counts the
attempt as a failure for its name and for its address at once — so a burst of parallel
guesses cannot slip in before the first of them is recorded — and refuses with
:class:`SigninThrottled` (``429 rate_limited``, ``Retry-After``) while either is backing off.
A successful sign-in then takes its attempt back (:meth:`SigninThrottle.succeeded`): the
name's count is forgotten, the address's count loses the one attempt (never more: an attacker
signing in to an account of their own between guesses gains nothing).

Counts, as :class:`ThrottlePolicy` holds them: the first ``per_name`` failures of a name (and
``per_address`` of an address) cost nothing; each further one doubles the wait, from
``base_delay`` up to ``max_delay``; a key quiet for ``forget_after`` seconds starts afresh.
Names are counted whether or not they exist (the answer must not tell), case-folded and by
digest; an IPv6 address counts for its /64 (one host usually holds the whole /64).

Two stores: :class:`MemoryThrottle` (one process; an injectable clock, bounded) and
:class:`RedisThrottle` (``CHATMEM_REDIS_URL``: every replica sees the same counts; each
admission is one atomic Lua script over both keys).
"""

from __future__ import annotations

import hashlib
import ipaddress
import logging
import math
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from chatmem.errors import ChatmemError, ConfigurationError, missing_driver

log = logging.getLogger(__name__)


class SigninThrottled(ChatmemError):
    """Too many failed sign-ins for this name or from this address: wait ``retry_after``."""

    code = "rate_limited"

    def __init__(self, retry_after: float) -> None:
        seconds = max(1, math.ceil(retry_after))
        super().__init__(
            f"Too many failed sign-ins. Try again in {seconds} s.", retry_after=seconds
        )
        self.retry_after = seconds


@dataclass(frozen=True)
class ThrottlePolicy:
    per_name: int = 5
    per_address: int = 20
    base_delay: float = 1.0
    max_delay: float = 900.0
    forget_after: float = 3600.0

    @classmethod
    def from_settings(cls, settings: Any) -> ThrottlePolicy:
        return cls(
            per_name=settings.signin_failures_per_name,
            per_address=settings.signin_failures_per_address,
            max_delay=settings.signin_max_delay,
        )

    def delay(self, failures: int, free: int) -> float:
        """Seconds to wait after ``failures`` counted failures of a key allowed ``free``."""
        over = failures - free
        if over <= 0:
            return 0.0
        if over > 64:  # 2**64 seconds is past any cap
            return self.max_delay
        return float(min(self.max_delay, self.base_delay * 2 ** (over - 1)))


@dataclass(frozen=True)
class Ticket:
    """An admitted attempt: the keys it counted for, to take it back after a success."""

    name_key: str
    address_key: str


def name_key(name: str) -> str:
    return (
        "name:"
        + hashlib.sha256(name.strip().casefold().encode("utf-8", "replace")).hexdigest()[:32]
    )


def address_key(address: str | None) -> str:
    text = (address or "unknown")[:64]
    try:
        ip = ipaddress.ip_address(text)
    except ValueError:
        return "addr:" + text
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return f"addr:{ip.ipv4_mapped}"
        return f"addr:{ipaddress.IPv6Network((ip, 64), strict=False)}"
    return f"addr:{ip}"


class TrustedProxies:
    """The reverse proxies whose ``X-Forwarded-For`` names the client (``CHATMEM_TRUSTED_PROXIES``:
    addresses or networks, comma-separated, or ``*``).  Without one, the connection's address
    is the client's."""

    def __init__(self, text: str = "") -> None:
        parts = [p.strip() for p in text.split(",") if p.strip()]
        self.everyone = "*" in parts
        self.networks = tuple(ipaddress.ip_network(p, strict=False) for p in parts if p != "*")

    def __bool__(self) -> bool:
        return self.everyone or bool(self.networks)

    def trusts(self, address: str) -> bool:
        if self.everyone:
            return True
        try:
            ip = ipaddress.ip_address(address)
        except ValueError:
            return False
        return any(ip in net for net in self.networks)

    def client_address(self, peer: str | None, forwarded_for: str | None) -> str | None:
        """The peer, or — when the peer is a trusted proxy — the rightmost address of
        ``X-Forwarded-For`` that is not a trusted proxy itself (what the proxies saw)."""
        if not peer or not forwarded_for or not self.trusts(peer):
            return peer
        hops = [hop.strip() for hop in forwarded_for.split(",") if hop.strip()]
        for hop in reversed(hops):
            if not self.trusts(hop):
                return hop
        return hops[0] if hops else peer


class SigninThrottle(Protocol):
    policy: ThrottlePolicy

    async def admit(self, name: str, address: str | None) -> Ticket:
        """Count the attempt, or raise :class:`SigninThrottled` without counting it."""
        ...

    async def succeeded(self, ticket: Ticket) -> None:
        """The attempt signed in: forget the name's failures, take the attempt back from the
        address."""
        ...

    async def close(self) -> None: ...


# --- in memory ---------------------------------------------------------------------------------


@dataclass
class _Count:
    failures: int = 0
    until: float = 0.0  # backing off until this time
    last: float = 0.0  # last counted attempt


class MemoryThrottle:
    """The counts of one process.  ``clock`` is monotonic seconds (injectable for tests);
    at most ``max_keys`` keys are held (the oldest are dropped first)."""

    def __init__(
        self,
        policy: ThrottlePolicy | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        max_keys: int = 100_000,
    ) -> None:
        self.policy = policy or ThrottlePolicy()
        self._clock = clock
        self._max_keys = max_keys
        self._counts: OrderedDict[str, _Count] = OrderedDict()
        self._lock = threading.Lock()

    def _get(self, key: str, now: float) -> _Count | None:
        count = self._counts.get(key)
        if (
            count is not None
            and count.until <= now
            and now - count.last >= self.policy.forget_after
        ):
            del self._counts[key]
            return None
        return count

    def admit_now(self, name: str, address: str | None) -> Ticket:
        ticket = Ticket(name_key(name), address_key(address))
        keys = (
            (ticket.name_key, self.policy.per_name),
            (ticket.address_key, self.policy.per_address),
        )
        with self._lock:
            now = self._clock()
            wait = 0.0
            for key, _free in keys:
                count = self._get(key, now)
                if count is not None and count.until > now:
                    wait = max(wait, count.until - now)
            if wait > 0:
                raise SigninThrottled(wait)
            for key, free in keys:
                count = self._get(key, now) or _Count()
                count.failures += 1
                count.last = now
                delay = self.policy.delay(count.failures, free)
                if delay:
                    count.until = now + delay
                self._counts[key] = count
                self._counts.move_to_end(key)
            while len(self._counts) > self._max_keys:
                self._counts.popitem(last=False)
        return ticket

    def succeeded_now(self, ticket: Ticket) -> None:
        with self._lock:
            self._counts.pop(ticket.name_key, None)
            count = self._counts.get(ticket.address_key)
            if count is None:
                return
            count.failures -= 1
            if count.failures <= 0:
                del self._counts[ticket.address_key]
            elif count.failures <= self.policy.per_address:
                count.until = 0.0

    async def admit(self, name: str, address: str | None) -> Ticket:
        return self.admit_now(name, address)

    async def succeeded(self, ticket: Ticket) -> None:
        self.succeeded_now(ticket)

    async def close(self) -> None:
        return None


# --- in Redis ----------------------------------------------------------------------------------

# KEYS: the name's and the address's hash (fields f = failures, u = back-off end, ms).
# ARGV: now (ms), forget (ms), base delay (ms), max delay (ms), free per name, free per address.
# Returns 0 (admitted and counted) or the milliseconds to wait (nothing counted).
_ADMIT = """
local now = tonumber(ARGV[1])
local forget = tonumber(ARGV[2])
local base = tonumber(ARGV[3])
local cap = tonumber(ARGV[4])
local wait = 0
for i = 1, #KEYS do
  local u = tonumber(redis.call('hget', KEYS[i], 'u') or '0')
  if u - now > wait then wait = u - now end
end
if wait > 0 then return wait end
for i = 1, #KEYS do
  local free = tonumber(ARGV[4 + i])
  local f = redis.call('hincrby', KEYS[i], 'f', 1)
  local over = f - free
  local ttl = forget
  if over > 0 then
    local d = cap
    if over <= 64 then d = math.min(cap, base * 2 ^ (over - 1)) end
    redis.call('hset', KEYS[i], 'u', math.floor(now + d))
    if d > ttl then ttl = d end
  end
  redis.call('pexpire', KEYS[i], math.ceil(ttl))
end
return 0
"""

# KEYS: the name's and the address's hash.  ARGV: free per address.
_SUCCEEDED = """
redis.call('del', KEYS[1])
if redis.call('exists', KEYS[2]) == 0 then return 0 end
local f = redis.call('hincrby', KEYS[2], 'f', -1)
if f <= 0 then
  redis.call('del', KEYS[2])
elseif f <= tonumber(ARGV[1]) then
  redis.call('hdel', KEYS[2], 'u')
end
return 0
"""


class RedisThrottle:
    """The counts in Redis, shared by every replica.  ``clock`` is wall-clock seconds."""

    def __init__(
        self,
        url: str,
        policy: ThrottlePolicy | None = None,
        *,
        prefix: str = "chatmem:signin:",
        clock: Callable[[], float] = time.time,
    ) -> None:
        try:
            import redis.asyncio as aioredis
            from redis.exceptions import RedisError
        except ImportError:
            raise missing_driver("CHATMEM_REDIS_URL", "Redis") from None

        self._errors: tuple[type[Exception], ...] = (RedisError,)
        self.policy = policy or ThrottlePolicy()
        self._redis: Any = aioredis.from_url(url, decode_responses=True)
        self._prefix = prefix
        self._clock = clock
        self._admit = self._redis.register_script(_ADMIT)
        self._succeeded = self._redis.register_script(_SUCCEEDED)

    async def admit(self, name: str, address: str | None) -> Ticket:
        ticket = Ticket(name_key(name), address_key(address))
        p = self.policy
        try:
            wait = await self._admit(
                keys=[self._prefix + ticket.name_key, self._prefix + ticket.address_key],
                args=[
                    int(self._clock() * 1000),
                    int(p.forget_after * 1000),
                    int(p.base_delay * 1000),
                    int(p.max_delay * 1000),
                    p.per_name,
                    p.per_address,
                ],
            )
        except self._errors:
            # Redis down: sign-in keeps working (unthrottled) rather than locking everybody
            # out; said loudly, since this is the brute-force guard.
            log.error("sign-in throttle: Redis unavailable, attempt not counted", exc_info=True)
            return ticket
        if int(wait) > 0:
            raise SigninThrottled(int(wait) / 1000)
        return ticket

    async def succeeded(self, ticket: Ticket) -> None:
        try:
            await self._succeeded(
                keys=[self._prefix + ticket.name_key, self._prefix + ticket.address_key],
                args=[self.policy.per_address],
            )
        except self._errors:
            log.error("sign-in throttle: Redis unavailable, success not recorded", exc_info=True)

    async def close(self) -> None:
        await self._redis.aclose()


def throttle_from_settings(settings: Any) -> SigninThrottle:
    policy = ThrottlePolicy.from_settings(settings)
    if settings.redis_url:
        return RedisThrottle(settings.redis_url, policy)
    return MemoryThrottle(policy)


def trusted_proxies_from_settings(settings: Any) -> TrustedProxies:
    try:
        return TrustedProxies(settings.trusted_proxies)
    except ValueError as exc:
        raise ConfigurationError(f"CHATMEM_TRUSTED_PROXIES: {exc}") from None
