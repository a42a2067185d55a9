"""The router's own Prometheus metrics: pressures, decisions, roles, failures.

A private `CollectorRegistry` per router app (several routers can live in one test process).
Gauges are refreshed from the runtime when `/metrics` is scraped.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest

from deploy.router.runtime import RouterRuntime
from planning.routing.fluidpd_router import (
    WorkerRole,
    cluster_pressures,
    worker_decode_pressure,
    worker_prefill_pressure,
)


class RouterMetrics:
    """The metric objects of one router."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.pressure = Gauge(
            "coral_router_pressure",
            "Mean FluidPD pressure of a role (1 = at the SLO)",
            ["role"],
            registry=r,
        )
        self.worker_pressure = Gauge(
            "coral_router_worker_pressure",
            "FluidPD pressure of one worker in its role",
            ["worker", "role"],
            registry=r,
        )
        self.worker_role = Gauge(
            "coral_router_worker_role",
            "1 for the role a worker serves now",
            ["worker", "role"],
            registry=r,
        )
        self.worker_draining = Gauge(
            "coral_router_worker_draining",
            "1 while a worker drains for a role flip",
            ["worker"],
            registry=r,
        )
        self.decisions = Counter(
            "coral_router_decisions",
            "Routing decisions by kind (pd, fluid_token)",
            ["kind"],
            registry=r,
        )
        self.role_flips = Counter(
            "coral_router_role_flips",
            "FluidRole flips started / completed",
            ["stage"],
            registry=r,
        )
        self.requests = Counter(
            "coral_router_requests", "Requests by outcome", ["outcome"], registry=r
        )
        self.upstream_failures = Counter(
            "coral_router_upstream_failures",
            "Failed calls to an instance",
            ["worker"],
            registry=r,
        )

    def render(self, runtime: RouterRuntime) -> bytes:
        """Refresh the gauges from `runtime` and return the text exposition."""
        view = runtime.view()
        params = runtime.params
        totals = cluster_pressures(view, params)
        self.pressure.labels(role=WorkerRole.PREFILL.value).set(totals.prefill)
        self.pressure.labels(role=WorkerRole.DECODE.value).set(totals.decode)
        for w in view.workers:
            if w.role is WorkerRole.PREFILL:
                value = worker_prefill_pressure(w, view, params.probe_prompt_tokens)
            else:
                value = worker_decode_pressure(w, view, params)
            for role in WorkerRole:
                self.worker_role.labels(worker=w.worker_id, role=role.value).set(
                    1 if w.role is role else 0
                )
                self.worker_pressure.labels(worker=w.worker_id, role=role.value).set(
                    value if w.role is role else 0
                )
            self.worker_draining.labels(worker=w.worker_id).set(1 if w.draining_to else 0)
        return generate_latest(self.registry)
