"""A bare Starlette streaming proxy: the physical limit of one HTTP hop (bench/load.py).

``python bench/_bare_proxy.py --port N --upstream http://127.0.0.1:M/v1`` forwards
``POST /v1/chat/completions`` to ``UPSTREAM/chat/completions`` with httpx and relays the
streamed bytes as they come; nothing is parsed, checked or stored.  ``GET /healthz`` answers
``ok``.  Served by uvicorn exactly as ``chatmem serve`` is (no access log).
"""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import AsyncIterator

import httpx
import uvicorn
from starlette.applications import Starlette
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route


def build_app(upstream: str) -> Starlette:
    client = httpx.AsyncClient(
        base_url=upstream,
        timeout=120,
        limits=httpx.Limits(max_connections=2000, max_keepalive_connections=2000),
    )

    async def completions(request: Request) -> Response:
        outgoing = client.build_request(
            "POST",
            "/chat/completions",
            content=await request.body(),
            headers={
                "content-type": "application/json",
                "authorization": request.headers.get("authorization", ""),
            },
        )
        upstream_response = await client.send(outgoing, stream=True)
        return StreamingResponse(
            upstream_response.aiter_raw(),
            status_code=upstream_response.status_code,
            media_type=upstream_response.headers.get("content-type"),
            background=BackgroundTask(upstream_response.aclose),
        )

    async def health(request: Request) -> Response:
        return PlainTextResponse("ok")

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        await client.aclose()

    return Starlette(
        routes=[
            Route("/v1/chat/completions", completions, methods=["POST"]),
            Route("/healthz", health),
        ],
        lifespan=lifespan,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--upstream", required=True, help="the provider's base URL, …/v1")
    args = parser.parse_args()
    uvicorn.run(
        build_app(args.upstream),
        host="127.0.0.1",
        port=args.port,
        log_level="warning",
        access_log=False,
    )


if __name__ == "__main__":
    main()
