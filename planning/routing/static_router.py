"""The static policy: fixed roles, no role changes; least-loaded or round-robin choice.

Per request, among the accepting instances of the request's model:
- if there are PREFILL and DECODE instances: a P/D split, prefill on the one with the least
  predicted prefill wait and decode on the one with the least KV usage (ties: fewer running,
  then lowest id) — or, in round-robin mode, the next of each in turn by request id;
- else, if there are COLOCATED (or only DECODE) instances: local prefill on the least-loaded
  (fewest queued prompt tokens + reserved KV tokens);
- else reject.
P and D always come from one region: `state.region` when the request arrived in one, else the
region whose best prefill instance drains first (round-robin: regions in turn by request id).
This is what SGLang's and vLLM's P/D routers do with a fixed P:D ratio (DESIGN.md baselines).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from planning.domain import Phase
from planning.routing.base_router import (
    ClusterState,
    InstanceView,
    Reject,
    RoleChange,
    Route,
    RouterPolicy,
)
from planning.workload import Request


class Choice(StrEnum):
    LEAST_LOADED = "least_loaded"
    ROUND_ROBIN = "round_robin"


@dataclass(frozen=True, slots=True)
class StaticRouter:
    """Fixed roles; stateless (round-robin turns come from the request id)."""

    choice: Choice = Choice.LEAST_LOADED

    @property
    def policy(self) -> RouterPolicy:
        return RouterPolicy.STATIC

    @property
    def control_interval_s(self) -> float:
        return 0.0

    def route(self, request: Request, state: ClusterState) -> Route | Reject:
        pools = _pools(state, request.model, state.region)
        if state.region is not None and not pools:
            return Reject(f"no accepting instance of {request.model!r} in {state.region!r}")
        pd_pools = [(p, d) for p, d, _ in pools if p and d]
        if pd_pools:
            if self.choice is Choice.ROUND_ROBIN:
                prefill, decode = pd_pools[request.request_id % len(pd_pools)]
                p = prefill[request.request_id % len(prefill)]
                d = decode[request.request_id % len(decode)]
            else:
                # one region's pool: the one whose best prefill instance drains first
                prefill, decode = min(pd_pools, key=lambda pool: _prefill_key(pool[0], state.now_s))
                p = min(prefill, key=lambda v: _prefill_key([v], state.now_s))
                d = min(decode, key=_decode_load)
            return Route(decode_instance=d.instance_id, prefill_instance=p.instance_id)
        local = sorted((v for _, d, c in pools for v in (c or d)), key=lambda v: v.instance_id)
        if local:
            if self.choice is Choice.ROUND_ROBIN:
                return Route(local[request.request_id % len(local)].instance_id)
            return Route(min(local, key=_local_load).instance_id)
        return Reject(f"no accepting instance serves model {request.model!r}")

    def control(self, state: ClusterState) -> tuple[RoleChange, ...]:
        return ()


Pool = tuple[list[InstanceView], list[InstanceView], list[InstanceView]]
_ROLE_INDEX = {Phase.PREFILL: 0, Phase.DECODE: 1, Phase.COLOCATED: 2}


def _pools(state: ClusterState, model: str, region: str | None) -> list[Pool]:
    """Per region (sorted by name; only `region` when given): the accepting prefill, decode and
    colocated instances of `model`, each in id order. Regions without any are left out."""
    by_region: dict[str, Pool] = {}
    for view in state.instances:
        if view.model != model or not view.accepting:
            continue
        if region is not None and view.region != region:
            continue
        pool = by_region.setdefault(view.region, ([], [], []))
        pool[_ROLE_INDEX[view.role]].append(view)
    return [by_region[r] for r in sorted(by_region)]


def _prefill_key(views: list[InstanceView], now_s: float) -> tuple[float, int]:
    """(least predicted prefill wait, its instance id) over `views`."""
    return min((v.predicted_prefill_wait_s(now_s), v.instance_id) for v in views)


def _decode_load(view: InstanceView) -> tuple[float, int, int]:
    return (view.kv_usage, view.decode_batch + view.decode_waiting, view.instance_id)


def _local_load(view: InstanceView) -> tuple[int, int]:
    return (view.queued_prompt_tokens + view.kv_used_tokens, view.instance_id)


def make(policy: RouterPolicy, choice: str = Choice.LEAST_LOADED) -> StaticRouter:
    """Registry entry point (`planning.routing.make_router`)."""
    return StaticRouter(Choice(choice))
