"""Benchmark of the OpenAI-compatible endpoint (issue 17).  Exit status 1 when the bar is missed.

**Overhead against calling the provider directly** (bar: ≤ 2× the turn route's overhead).
Time to the first text delta, median over 200 turns each, as deployed: ``chatmem serve``,
the fake provider and this client are three processes.

* endpoint: the ``openai`` SDK streaming ``POST /v1/chat/completions`` into a fresh
  conversation (named in ``X-Chatmem-Conversation``, only the new message sent), minus the
  same SDK streaming from the provider directly;
* turn route: ``POST /api/v1/conversations/{id}/turns`` with ``Accept: text/event-stream``
  (one request to the first token) with httpx, minus httpx streaming from the provider
  directly (the SDK's own cost is in both of the endpoint's figures, httpx's in both of the
  route's);
* for reference, the endpoint without a conversation header (it creates the conversation);
* the Responses endpoint (issue 29, API-3) like with like: the same SDK streaming ``POST
  /v1/responses`` with the same one new message into a fresh conversation (named by
  ``conversation``), and without one (it creates the conversation), minus the same SDK
  streaming from the provider directly — its overhead beside the chat endpoint's (bar:
  ≤ 1.5× the chat endpoint's overhead + 1 ms).

The four are interleaved turn by turn, so a busy spell of the machine hits all of them; each
stream is read to its end so every client reuses its connection.  The load average is
printed before and after.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402
import openai  # noqa: E402
from tests.support.serve import ServeProcess, fake_profile, model_server_process  # noqa: E402

TURNS = 200
failures: list[str] = []


def _sdk_first(stream: openai.Stream) -> float:  # type: ignore[type-arg]
    """Reads to the end; returns when the first text delta arrived."""
    first = None
    for chunk in stream:
        if first is None and chunk.choices and chunk.choices[0].delta.content:
            first = time.perf_counter()
    if first is None:
        raise RuntimeError("no text delta")
    return first


def _httpx_first(response: httpx.Response, is_text: Callable[[str], bool]) -> float:
    first = None
    for line in response.iter_lines():
        if first is None and is_text(line):
            first = time.perf_counter()
    if first is None:
        raise RuntimeError("no text delta")
    return first


def _responses_first(stream: openai.Stream) -> float:  # type: ignore[type-arg]
    """Reads the Responses stream to its end; returns when the first text delta arrived."""
    first = None
    for event in stream:
        if first is None and event.type == "response.output_text.delta" and event.delta:
            first = time.perf_counter()
    if first is None:
        raise RuntimeError("no text delta")
    return first


def _openai_text(line: str) -> bool:
    if not line.startswith("data: {"):
        return False
    choices = json.loads(line[6:]).get("choices") or [{}]
    return bool(choices[0].get("delta", {}).get("content"))


def _timed(fn: Callable[[], float]) -> float:
    """Seconds from the request to its first text delta."""
    started = time.perf_counter()
    return fn() - started


def main() -> int:
    load_before = os.getloadavg()[0]
    samples: dict[str, list[float]] = {
        "sdk direct": [],
        "endpoint": [],
        "endpoint, new conversation": [],
        "httpx direct": [],
        "turn route": [],
        "responses": [],
        "responses, new conversation": [],
    }
    message = [{"role": "user", "content": "hi"}]
    with tempfile.TemporaryDirectory() as tmp, model_server_process() as model:
        server = ServeProcess(Path(tmp))
        server.start()
        try:
            model.set_default_reply("one two three")
            with server.signed_in("bench") as api:
                profile_id = fake_profile(api, model.base_url)
                token = str(api.headers["authorization"]).split(" ", 1)[1]
                conversations = [
                    api.post(
                        "/api/v1/conversations", json={"title": "bench", "profile_id": profile_id}
                    ).json()["id"]
                    for _ in range(3 * (TURNS + 1))
                ]
                sdk_direct = openai.OpenAI(base_url=model.base_url, api_key="x", max_retries=0)
                sdk = openai.OpenAI(base_url=server.url + "/v1", api_key=token, max_retries=0)
                provider = httpx.Client(timeout=30)
                direct_body = {
                    "model": "fake-model",
                    "messages": message,
                    "stream": True,
                    "stream_options": {"include_usage": True},
                }

                def run_sdk_direct() -> float:
                    return _sdk_first(
                        sdk_direct.chat.completions.create(
                            model="fake-model",
                            messages=message,  # type: ignore[arg-type]
                            stream=True,
                            stream_options={"include_usage": True},
                        )
                    )

                def run_endpoint(cid: str | None) -> Callable[[], float]:
                    def run() -> float:
                        return _sdk_first(
                            sdk.chat.completions.create(
                                model="fake",
                                messages=message,  # type: ignore[arg-type]
                                stream=True,
                                extra_headers={"X-Chatmem-Conversation": cid} if cid else None,
                            )
                        )

                    return run

                def run_responses(cid: str | None) -> Callable[[], float]:
                    def run() -> float:
                        return _responses_first(
                            sdk.responses.create(
                                model="fake",
                                input="hi",
                                stream=True,
                                conversation=cid if cid else openai.omit,
                            )
                        )

                    return run

                def run_httpx_direct() -> float:
                    url = model.base_url + "/chat/completions"
                    with provider.stream("POST", url, json=direct_body) as response:
                        return _httpx_first(response, _openai_text)

                def run_turn(cid: str) -> Callable[[], float]:
                    def run() -> float:
                        with api.stream(
                            "POST",
                            f"/api/v1/conversations/{cid}/turns",
                            json={"content": "hi"},
                            headers={"Accept": "text/event-stream"},
                        ) as response:
                            return _httpx_first(response, lambda line: line == "event: delta")

                    return run

                for index in range(TURNS + 1):
                    measured = {
                        "sdk direct": _timed(run_sdk_direct),
                        "endpoint": _timed(run_endpoint(conversations[3 * index])),
                        "endpoint, new conversation": _timed(run_endpoint(None)),
                        "httpx direct": _timed(run_httpx_direct),
                        "turn route": _timed(run_turn(conversations[3 * index + 1])),
                        "responses": _timed(run_responses(conversations[3 * index + 2])),
                        "responses, new conversation": _timed(run_responses(None)),
                    }
                    if index:  # the first round warms caches and connections
                        for name, seconds in measured.items():
                            samples[name].append(seconds)
                provider.close()
        finally:
            server.stop()
    median = {name: statistics.median(values) * 1000 for name, values in samples.items()}
    endpoint = median["endpoint"] - median["sdk direct"]
    fresh = median["endpoint, new conversation"] - median["sdk direct"]
    route = median["turn route"] - median["httpx direct"]
    responses = median["responses"] - median["sdk direct"]
    responses_fresh = median["responses, new conversation"] - median["sdk direct"]
    print(
        f"time to first token (median of {TURNS}): provider direct {median['sdk direct']:.2f} ms "
        f"(SDK) / {median['httpx direct']:.2f} ms (httpx); /v1/chat/completions "
        f"{median['endpoint']:.2f} ms, overhead {endpoint:.2f} ms (new conversation each: "
        f"{fresh:.2f} ms); turn route {median['turn route']:.2f} ms, overhead {route:.2f} ms; "
        f"endpoint/route {endpoint / route:.2f}× (bar 2×); /v1/responses "
        f"{median['responses']:.2f} ms, overhead {responses:.2f} ms (new conversation each: "
        f"{responses_fresh:.2f} ms) beside the chat endpoint's {endpoint:.2f} ms (bar 1.5× + "
        f"1 ms); load average {load_before:.1f} "
        f"before, {os.getloadavg()[0]:.1f} after"
    )
    if endpoint > 2 * route:
        failures.append(f"endpoint overhead {endpoint:.2f} ms > 2 × turn route's {route:.2f} ms")
    if responses > 1.5 * endpoint + 1.0:
        failures.append(
            f"responses overhead {responses:.2f} ms > 1.5 × chat endpoint's {endpoint:.2f} ms + 1"
        )
    for failure in failures:
        print(f"FAILED: {failure}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
