"""A real ``chatmem serve`` and the fake provider, shared by the tests that drive ``/v1`` with
real OpenAI clients (the ``openai`` SDK, LangChain, LlamaIndex): the server's lifecycle, a
user's key, the clients made with it and the profiles pointing at the fake provider.  Each
test module extends :class:`OpenAIWorld` with what only it needs and declares its two
fixtures with :func:`serve` and :func:`fresh`."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import httpx
import openai
import pytest
from tests.support.model_server import FakeModelServer
from tests.support.serve import ServeProcess


class OpenAIWorld:
    """``server`` and ``model``; ``default``: the signed-in client a call without one uses."""

    def __init__(self, server: ServeProcess, model: FakeModelServer) -> None:
        self.server = server
        self.model = model
        self.default: httpx.Client | None = None

    def _client(self, api: httpx.Client | None) -> httpx.Client:
        chosen = api or self.default
        assert chosen is not None, "no client given and no default one"
        return chosen

    def token(self, api: httpx.Client | None = None) -> str:
        """The API key the client signs in with (``Authorization: Bearer …``)."""
        return str(self._client(api).headers["authorization"]).split(" ", 1)[1]

    def sdk(self, api: httpx.Client | None = None) -> openai.OpenAI:
        return openai.OpenAI(
            base_url=self.server.url + "/v1", api_key=self.token(api), max_retries=0
        )

    def async_sdk(self, api: httpx.Client | None = None) -> openai.AsyncOpenAI:
        return openai.AsyncOpenAI(
            base_url=self.server.url + "/v1", api_key=self.token(api), max_retries=0
        )

    def add_profile(self, api: httpx.Client, name: str, **fields: Any) -> str:
        """A model profile of the user's on the fake provider (free unless ``fields`` say
        otherwise); its id."""
        body = {"name": name, "base_url": self.model.base_url, "model": "fake-model", "free": True}
        created = api.post("/api/v1/profiles", json={**body, **fields})
        assert created.status_code == 201, created.text
        return str(created.json()["id"])


W = TypeVar("W", bound=OpenAIWorld)


def serve(
    tmp_path_factory: pytest.TempPathFactory,
    name: str,
    make: Callable[[ServeProcess, FakeModelServer], W],
) -> Iterator[W]:
    """A module fixture's body: the server on a new state directory and the fake provider,
    up for the module, stopped after it."""
    server = ServeProcess(tmp_path_factory.mktemp(name))
    with FakeModelServer() as model:
        server.start()
        try:
            yield make(server, model)
        finally:
            server.stop()


def fresh(world: W) -> Iterator[W]:
    """A test fixture's body: the world with the provider's recorded requests and scripted
    replies forgotten before and after the test."""
    world.model.reset()
    yield world
    world.model.reset()
