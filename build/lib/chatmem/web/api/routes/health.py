"""Health for probes and scrapers: ``/healthz`` (alive), ``/readyz`` (able to serve) and
``/metrics`` (Prometheus' text format, for an administrator's token or the metrics token)."""

from __future__ import annotations

import hmac

import anyio.to_thread
from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from chatmem.errors import Forbidden
from chatmem.store.accounts import user_by_id
from chatmem.store.db import Database
from chatmem.telemetry.metrics import CONTENT_TYPE, Metrics
from chatmem.web.deps import authenticated_user_id

router = APIRouter(tags=["health"])


@router.get("/healthz", include_in_schema=False)
async def healthz() -> dict[str, str]:
    """Alive: the process answers (no database round trip)."""
    return {"status": "ok"}


@router.get(
    "/readyz",
    responses={
        503: {"description": '`{"error": {"code": "not_ready", "message": …, "reasons": […]}}`'}
    },
)
async def readyz(request: Request) -> JSONResponse:
    """Ready to serve: the database reachable and migrated to this version's schema, Redis
    reachable when configured, the encryption key loaded.  503 with the reasons otherwise."""
    reasons: list[str] = []
    db: Database | None = getattr(request.app.state, "db", None)
    if db is None:
        reasons.append("the database is not open yet")
    else:
        problem = await anyio.to_thread.run_sync(db.readiness)
        if problem:
            reasons.append(problem)
    if getattr(request.app.state, "secrets", None) is None:
        reasons.append("the encryption key is not loaded")
    turns = getattr(request.app.state, "turns", None)
    if turns is None:
        reasons.append("the turn service has not started")
    else:
        problem = await turns.coordinator.readiness()
        if problem:
            reasons.append(problem)
    if reasons:
        error = {"code": "not_ready", "message": "; ".join(reasons), "reasons": reasons}
        return JSONResponse({"error": error}, status_code=503)
    return JSONResponse({"status": "ready"})


def _may_read_metrics(request: Request) -> None:
    """The configured metrics token, or an administrator's API token or session."""
    wanted = request.app.state.settings.metrics_token
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if wanted and scheme.lower() == "bearer" and hmac.compare_digest(token.strip(), wanted):
        return
    user_id = authenticated_user_id(request)
    db: Database = request.app.state.db
    with db.session() as session:
        user = user_by_id(session, user_id)
    if user is None or not user.is_admin:
        raise Forbidden("Administrators only (or the metrics token).")


@router.get(
    "/metrics",
    response_class=Response,
    responses={
        200: {"content": {CONTENT_TYPE: {}}, "description": "Prometheus' text format"},
        401: {"description": "no credential"},
        403: {"description": "not an administrator, nor the metrics token"},
    },
)
def metrics(request: Request) -> Response:
    """The server's metrics (:class:`chatmem.telemetry.metrics.Metrics`)."""
    _may_read_metrics(request)
    registry: Metrics = request.app.state.metrics
    return Response(registry.render(), media_type=CONTENT_TYPE)
