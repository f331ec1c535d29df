"""The app's model clients: connection pools shared per base URL, bounded.

Opening a pool builds a TLS context and costs tens of milliseconds — more than the whole
server overhead allowed on the way to the first token — so pools outlive turns.  A pool is
keyed by the endpoint's base URL (and whether its host is concealed, SEC-4), never by its API
key: the key travels with each request (:class:`~chatmem.models.client.ModelClient`), so no
plaintext key is a dictionary key and profiles on one server share its connections.  At most
``size`` pools are kept; the least recently used one is retired (closed once its requests in
flight have ended).  The turn service owns one and closes it on shutdown.
"""

from __future__ import annotations

from collections import OrderedDict

from chatmem.errors import ProviderError
from chatmem.models.client import ModelClient, ModelEndpoint
from chatmem.models.pool import SharedHttp, http_pool
from chatmem.security.endpoints import EndpointPolicy
from chatmem.settings import Settings

MAX_POOLS = 64


class ModelClients:
    def __init__(
        self, policy: EndpointPolicy, settings: Settings, *, size: int = MAX_POOLS
    ) -> None:
        self._policy = policy
        #: Read at each use: the model timeout and the answer bound (PROV-5) apply as set.
        self._settings = settings
        self._size = size
        self._pools: OrderedDict[tuple[str, bool], SharedHttp] = OrderedDict()

    def __call__(self, endpoint: ModelEndpoint | None) -> ModelClient:
        if endpoint is None:
            raise ProviderError(
                "This conversation has no model profile: choose a model for it first."
            )
        key = (endpoint.base_url.rstrip("/"), endpoint.conceal)
        pool = self._pools.get(key)
        if pool is None:
            policy = self._policy.concealed() if endpoint.conceal else self._policy
            pool = self._pools[key] = SharedHttp(
                http_pool(policy, timeout=self._settings.model_timeout)
            )
            while len(self._pools) > self._size:
                _, oldest = self._pools.popitem(last=False)
                oldest.retire_soon()  # closed once its requests in flight have ended
        else:
            self._pools.move_to_end(key)
        return ModelClient(
            endpoint,
            self._policy,
            timeout=self._settings.model_timeout,
            max_answer_bytes=self._settings.max_answer_bytes,
            shared=pool,
        )

    def __len__(self) -> int:
        return len(self._pools)

    async def aclose(self) -> None:
        pools, self._pools = list(self._pools.values()), OrderedDict()
        for pool in pools:
            await pool.retire()
