"""The live FluidPD router: an OpenAI-compatible FastAPI app in front of configured engines.

Endpoints: `POST /v1/completions`, `POST /v1/chat/completions` (streaming or not),
`GET /v1/models`, `GET /health`, `GET /metrics` (the router's own), and the admin API
`GET|PUT /admin/params` (FluidPD elasticity parameters, changed without restart),
`POST /admin/roles` (force a drain-then-flip), `GET|PUT /admin/instances` (replace the
instance set in place: new instances take requests at once, removed ones get no new requests,
finish what they have, then are forgotten), `GET /admin/state`. Admin calls need
`Authorization: Bearer <admin_token>` when a token is configured, else a loopback client.

Background tasks: scrape every engine's `/metrics` (`scrape_interval_s`) and run FluidRole's
controller (`control_interval_s`): both call the same pure policy the simulator runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import math
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
from fastapi import Depends, FastAPI, HTTPException, Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict

from deploy.router.base_engine_adapter import EngineAdapter
from deploy.router.config import InstancesUpdate, RouterConfig
from deploy.router.observability import RouterMetrics
from deploy.router.proxy import Proxy
from deploy.router.runtime import RouterRuntime, WorkerRuntime
from deploy.router.vllm_engine_adapter import VllmEngineAdapter
from planning.routing.fluidpd_router import RoleFlip, WorkerRole, cluster_pressures, step_roles

LOOPBACK = frozenset({"127.0.0.1", "::1", "localhost"})


class RoleRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    instance: str
    role: WorkerRole


def create_app(config: RouterConfig, adapter: EngineAdapter | None = None) -> FastAPI:
    """Build the router app for one deployment (started by uvicorn; see `deploy.router.server`)."""
    runtime = RouterRuntime.from_config(config)
    engine = adapter or VllmEngineAdapter()
    metrics = RouterMetrics()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        limits = httpx.Limits(max_connections=None, max_keepalive_connections=None)
        async with httpx.AsyncClient(limits=limits, trust_env=False) as client:
            app.state.proxy = Proxy(runtime, engine, client, metrics)
            tasks = [
                asyncio.create_task(_scrape_loop(runtime, engine, client)),
                asyncio.create_task(_control_loop(runtime, engine, client, metrics)),
            ]
            try:
                yield
            finally:
                for task in tasks:
                    task.cancel()
                for task in tasks:
                    with contextlib.suppress(asyncio.CancelledError):
                        await task

    app = FastAPI(title="coral FluidPD router", lifespan=lifespan)
    app.state.runtime = runtime
    admin = Depends(_admin_guard(config))
    _add_api_routes(app)
    _add_admin_routes(app, runtime, admin)

    @app.get("/metrics")
    async def prom() -> Response:
        return Response(metrics.render(runtime), media_type="text/plain; version=0.0.4")

    return app


def _add_api_routes(app: FastAPI) -> None:
    async def body_of(request: Request) -> dict[str, Any]:
        try:
            body = await request.json()
        except ValueError as exc:
            raise HTTPException(400, "body is not JSON") from exc
        if not isinstance(body, dict):
            raise HTTPException(400, "body must be a JSON object")
        return body

    @app.post("/v1/completions")
    async def completions(request: Request) -> Response:
        return await request.app.state.proxy.handle("/completions", await body_of(request))

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> Response:
        return await request.app.state.proxy.handle("/chat/completions", await body_of(request))

    @app.get("/v1/models")
    async def models(request: Request) -> Response:
        proxy: Proxy = request.app.state.proxy
        for worker in list(proxy.runtime.workers.values()):
            with contextlib.suppress(httpx.HTTPError):
                response = await proxy.client.get(f"{worker.base_url}/v1/models", timeout=5.0)
                if response.status_code == 200:
                    return Response(response.content, media_type="application/json")
        return JSONResponse({"error": {"message": "no instance answered"}}, 503)

    @app.get("/health")
    async def health(request: Request) -> dict[str, Any]:
        runtime: RouterRuntime = request.app.state.runtime
        now = time.monotonic()
        return {
            "status": "ok",
            "healthy_instances": sum(w.healthy(now) for w in runtime.workers.values()),
        }


def _add_admin_routes(app: FastAPI, runtime: RouterRuntime, admin: Any) -> None:
    @app.get("/admin/params", dependencies=[admin])
    async def get_params() -> dict[str, Any]:
        return runtime.params.to_dict()

    @app.put("/admin/params", dependencies=[admin])
    async def put_params(changes: dict[str, Any]) -> dict[str, Any]:
        try:
            runtime.params = runtime.params.with_updates(**changes)
        except (ValueError, TypeError) as exc:
            raise HTTPException(400, str(exc)) from exc
        return runtime.params.to_dict()

    @app.post("/admin/roles", dependencies=[admin])
    async def force_role(change: RoleRequest) -> dict[str, Any]:
        worker = runtime.workers.get(change.instance)
        if worker is None:
            raise HTTPException(404, f"no instance {change.instance!r}")
        if worker.colocated:
            raise HTTPException(409, f"{change.instance} is colocated: it has no P/D role")
        if worker.role is not change.role and _count(runtime, worker.role) <= 1:
            raise HTTPException(409, f"{change.instance} is the last {worker.role} instance")
        runtime.apply_flip(RoleFlip(change.instance, change.role, completed=False))
        return _state(runtime)

    @app.get("/admin/state", dependencies=[admin])
    async def state() -> dict[str, Any]:
        runtime.reap_retired()
        return _state(runtime)

    @app.get("/admin/instances", dependencies=[admin])
    async def get_instances() -> dict[str, Any]:
        return {"instances": _instances(runtime)}

    @app.put("/admin/instances", dependencies=[admin])
    async def put_instances(update: InstancesUpdate) -> dict[str, Any]:
        """Replace the instance set (the only way upstreams change); 409 leaves it as it was."""
        try:
            change = runtime.replace_instances(update.instances)
        except ValueError as exc:
            raise HTTPException(409, str(exc)) from exc
        retiring = {w.worker_id: w.in_flight() for w in runtime.retiring}
        return {**change, "instances": _instances(runtime), "retiring": retiring}


def _instances(runtime: RouterRuntime) -> list[dict[str, Any]]:
    """The live pool in `InstanceConfig` form (roles as served now, after pending flips)."""
    return [
        {"id": w.worker_id, "url": w.base_url, "role": w.instance_role.value}
        for w in runtime.workers.values()
    ]


def _count(runtime: RouterRuntime, role: WorkerRole) -> int:
    return sum(1 for w in runtime.workers.values() if (w.draining_to or w.role) is role)


def _state(runtime: RouterRuntime) -> dict[str, Any]:
    pressures = cluster_pressures(runtime.view(), runtime.params)
    return {
        "pressure": {"prefill": pressures.prefill, "decode": pressures.decode},
        "flips_started": runtime.flips_started,
        "flips_completed": runtime.flips_completed,
        "instances": {w.worker_id: _worker_state(w) for w in runtime.workers.values()},
        "retiring": {w.worker_id: _worker_state(w) for w in runtime.retiring},
    }


def _worker_state(w: WorkerRuntime) -> dict[str, Any]:
    return {
        "role": "colocated" if w.colocated else w.role.value,
        "draining_to": w.draining_to.value if w.draining_to else None,
        "prefill_requests": w.prefill_requests,
        "decode_seqs": w.decode_seqs,
        "healthy": w.healthy(time.monotonic()),
    }


def _admin_guard(config: RouterConfig) -> Any:
    """Bearer token when configured (constant-time compare), else loopback clients only."""

    async def guard(request: Request) -> None:
        if config.admin_token is not None:
            header = request.headers.get("authorization", "")
            expected = f"Bearer {config.admin_token}"
            if not hmac.compare_digest(header.encode(), expected.encode()):
                raise HTTPException(401, "admin needs a valid bearer token")
            return
        host = request.client.host if request.client else ""
        if host not in LOOPBACK:
            raise HTTPException(403, "admin is only open to loopback clients")

    return guard


async def _scrape_loop(
    runtime: RouterRuntime, engine: EngineAdapter, client: httpx.AsyncClient
) -> None:
    while True:
        await asyncio.gather(*(_scrape(w, engine, client) for w in runtime.workers.values()))
        await asyncio.sleep(runtime.config.scrape_interval_s)


async def _scrape(worker: WorkerRuntime, engine: EngineAdapter, client: httpx.AsyncClient) -> None:
    try:
        response = await client.get(
            f"{worker.base_url}{engine.metrics_path}",
            timeout=httpx.Timeout(2.0, connect=1.0),
        )
        response.raise_for_status()
        worker.metrics = engine.parse_metrics(response.text)
        worker.unhealthy_until_s = 0.0  # it answers: let requests try it again
    except (httpx.HTTPError, ValueError):
        worker.unhealthy_until_s = math.inf  # out of routing until a scrape succeeds again


async def _control_loop(
    runtime: RouterRuntime,
    engine: EngineAdapter,
    client: httpx.AsyncClient,
    metrics: RouterMetrics,
) -> None:
    while True:
        await asyncio.sleep(runtime.config.control_interval_s)
        runtime.reap_retired()
        if runtime.colocated:
            continue  # no P/D roles to balance
        now = time.monotonic()
        state, flips = step_roles(runtime.view(now), runtime.role_state, runtime.params, now)
        runtime.role_state = state
        for flip in flips:
            worker = runtime.workers.get(flip.worker_id)
            if worker is None:
                continue  # removed from the pool during an earlier flip's await
            if flip.completed:
                await engine.set_role(client, worker.base_url, flip.to_role)
            before = (runtime.flips_started, runtime.flips_completed)
            runtime.apply_flip(flip)
            if (runtime.flips_started, runtime.flips_completed) != before:
                metrics.role_flips.labels(stage="completed" if flip.completed else "started").inc()
