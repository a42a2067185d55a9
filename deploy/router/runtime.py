"""The live router's mutable state: roles, in-flight token accounting, health, scraped metrics.

Everything here runs on the router's one asyncio loop, so no locks. `RouterRuntime.view()`
freezes it into the `ClusterView` the pure FluidPD policy (`planning.routing.fluidpd_router`)
decides on; `apply_flip` carries out the policy's FluidRole decisions.

Membership changes (`replace_instances`, the admin API) take effect at once for routing: a
removed worker leaves `workers` (so the policy never sees it again: role counts, minimums and
pressures are over the live pool only) and waits in `retiring` until the requests it already
has finish (they hold the worker object), then `reap_retired` forgets it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Any

from deploy.router.base_engine_adapter import EngineMetrics
from deploy.router.config import (
    InstanceConfig,
    InstanceRole,
    RouterConfig,
    check_pool,
    worker_role,
)
from planning.routing.fluidpd_params import FluidPDParams
from planning.routing.fluidpd_router import (
    ClusterView,
    RoleControllerState,
    RoleFlip,
    WorkerRole,
    WorkerView,
)
from planning.routing.pressure import LinearStepModel, WorkerLoad


@dataclass
class WorkerRuntime:
    """One upstream instance: its configured address and what the router knows of it now."""

    worker_id: str
    base_url: str
    role: WorkerRole
    perf: LinearStepModel
    draining_to: WorkerRole | None = None
    prefill_requests: int = 0  # P/D prefill legs in flight
    prefill_tokens: float = 0.0  # prompt tokens of those legs
    local_prefill_tokens: float = 0.0  # FluidToken prompts not yet past their first token
    decode_seqs: int = 0  # decode legs and FluidToken requests in flight
    decode_context_tokens: float = 0.0
    unhealthy_until_s: float = 0.0
    metrics: EngineMetrics | None = None
    colocated: bool = False  # takes whole requests only; never part of the P/D policy

    @property
    def instance_role(self) -> InstanceRole:
        """The role it serves once any pending flip completes."""
        if self.colocated:
            return InstanceRole.COLOCATED
        return InstanceRole((self.draining_to or self.role).value)

    def in_flight(self) -> int:
        """All requests the router has on it, of any role."""
        return self.prefill_requests + self.decode_seqs

    def healthy(self, now_s: float) -> bool:
        return now_s >= self.unhealthy_until_s

    def role_work(self) -> int:
        """In-flight requests of its current role (what a flip waits to drain)."""
        return self.prefill_requests if self.role is WorkerRole.PREFILL else self.decode_seqs

    def load(self) -> WorkerLoad:
        """Router accounting, raised to the engine's own figures where those are larger
        (the engine also sees traffic from other routers; the scrape is up to one interval old)."""
        running = self.decode_seqs
        kv = None
        if self.metrics is not None:
            running = max(running, int(self.metrics.num_requests_running))
            if self.metrics.kv_cache_usage_frac is not None and self.perf.kv_capacity_tokens:
                accounted = self.decode_context_tokens / self.perf.kv_capacity_tokens
                kv = max(self.metrics.kv_cache_usage_frac, accounted)
        queued = self.prefill_tokens if self.role is WorkerRole.PREFILL else 0.0
        return WorkerLoad(
            queued_prompt_tokens=queued + self.local_prefill_tokens,
            running_seqs=running,
            context_tokens=self.decode_context_tokens,
            kv_usage_frac=kv,
        )


@dataclass
class RouterRuntime:
    """All workers of the deployment, the live FluidPD parameters and FluidRole's memory."""

    config: RouterConfig
    params: FluidPDParams
    workers: dict[str, WorkerRuntime]
    role_state: RoleControllerState = field(default_factory=RoleControllerState)
    flips_started: int = 0
    flips_completed: int = 0
    retiring: list[WorkerRuntime] = field(default_factory=list)  # removed, requests in flight

    @property
    def colocated(self) -> bool:
        """A colocated-only pool: whole requests on the least-loaded instance, no FluidPD."""
        return any(w.colocated for w in self.workers.values())

    @classmethod
    def from_config(cls, config: RouterConfig) -> RouterRuntime:
        workers = {i.id: _worker(config, i) for i in config.instances}
        return cls(config=config, params=config.params(), workers=workers)

    def view(self, now_s: float | None = None) -> ClusterView:
        now = time.monotonic() if now_s is None else now_s
        return ClusterView(
            workers=tuple(
                WorkerView(
                    worker_id=w.worker_id,
                    role=w.role,
                    load=w.load(),
                    perf=w.perf,
                    kv_capacity_tokens=w.perf.kv_capacity_tokens,
                    draining_to=w.draining_to,
                    in_flight_role_work=w.role_work(),
                    healthy=w.healthy(now),
                )
                for w in self.workers.values()
                if not w.colocated
            ),
            ttft_slo_s=self.config.ttft_slo_s,
            tpot_slo_s=self.config.tpot_slo_s,
        )

    def apply_flip(self, flip: RoleFlip) -> None:
        """Start draining a worker, or complete its (drained) flip. Unknown ids are ignored."""
        worker = self.workers.get(flip.worker_id)
        if worker is None:
            return
        if not flip.completed:
            if worker.draining_to is None and worker.role is not flip.to_role:
                worker.draining_to = flip.to_role
                self.flips_started += 1
        elif worker.draining_to is flip.to_role and worker.role_work() == 0:
            worker.role = flip.to_role
            worker.draining_to = None
            self.flips_completed += 1

    def replace_instances(self, instances: list[InstanceConfig]) -> dict[str, Any]:
        """Make `instances` the pool, in place. An id already served at the same URL (and of
        the same kind) keeps its live state and role (FluidRole may have flipped it: its role
        here is only the starting role of new instances). Others are added; workers not in
        `instances` (or whose URL changed) retire: no new requests, in-flight ones finish.
        Raises ValueError (nothing changed) unless the resulting pool is valid."""
        kept = {i.id: self.workers[i.id] for i in instances if self._same(i)}
        roles = [kept[i.id].instance_role if i.id in kept else i.role for i in instances]
        check_pool(instances, roles)
        added = [i.id for i in instances if i.id not in kept]
        retired = [w for w in self.workers.values() if kept.get(w.worker_id) is not w]
        self.workers = {i.id: kept.get(i.id) or _worker(self.config, i) for i in instances}
        self.retiring.extend(retired)
        if added or retired:  # a new pool: FluidRole observes it afresh (cooldown kept)
            self.role_state = replace(self.role_state, overloaded=None, imbalance_since_s=None)
        self.reap_retired()
        return {
            "added": added,
            "removed": [w.worker_id for w in retired],
            "kept": [i.id for i in instances if i.id in kept],
        }

    def _same(self, instance: InstanceConfig) -> bool:
        w = self.workers.get(instance.id)
        return (
            w is not None
            and w.base_url == str(instance.url).rstrip("/")
            and w.colocated == (instance.role is InstanceRole.COLOCATED)
        )

    def reap_retired(self) -> list[str]:
        """Forget retired workers whose last request finished; returns their ids."""
        done = [w for w in self.retiring if w.in_flight() == 0]
        self.retiring = [w for w in self.retiring if w.in_flight() > 0]
        return [w.worker_id for w in done]


def _worker(config: RouterConfig, instance: InstanceConfig) -> WorkerRuntime:
    role = worker_role(instance.role)
    return WorkerRuntime(
        worker_id=instance.id,
        base_url=str(instance.url).rstrip("/"),
        role=role or WorkerRole.DECODE,  # colocated: accounted like a decode worker
        perf=config.instance_perf(instance),
        colocated=role is None,
    )
