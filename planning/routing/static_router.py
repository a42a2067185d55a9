"""The static policy: fixed roles, no role changes; least-loaded or round-robin choice.

Per request, among the accepting instances of the request's model:
- if there are PREFILL and DECODE instances: a P/D split, prefill on the one with the least
  predicted prefill wait and decode on the one with the least KV usage (ties: fewer running,
  then lowest id) — or, in round-robin mode, the next of each in turn by request id;
- else, if there are COLOCATED (or only DECODE) instances: local prefill on the least-loaded
  (fewest queued prompt tokens + reserved KV tokens);
- else reject.
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
        prefill, decode, colocated = _by_role(state, request.model)
        if prefill and decode:
            if self.choice is Choice.ROUND_ROBIN:
                p = prefill[request.request_id % len(prefill)]
                d = decode[request.request_id % len(decode)]
            else:
                p = min(
                    prefill, key=lambda v: (v.predicted_prefill_wait_s(state.now_s), v.instance_id)
                )
                d = min(decode, key=_decode_load)
            return Route(decode_instance=d.instance_id, prefill_instance=p.instance_id)
        local = colocated or decode
        if local:
            if self.choice is Choice.ROUND_ROBIN:
                return Route(local[request.request_id % len(local)].instance_id)
            return Route(min(local, key=_local_load).instance_id)
        return Reject(f"no accepting instance serves model {request.model!r}")

    def control(self, state: ClusterState) -> tuple[RoleChange, ...]:
        return ()


def _by_role(
    state: ClusterState, model: str
) -> tuple[list[InstanceView], list[InstanceView], list[InstanceView]]:
    prefill: list[InstanceView] = []
    decode: list[InstanceView] = []
    colocated: list[InstanceView] = []
    lists = {Phase.PREFILL: prefill, Phase.DECODE: decode, Phase.COLOCATED: colocated}
    for view in state.instances:
        if view.model == model and view.accepting:
            lists[view.role].append(view)
    return prefill, decode, colocated


def _least_prefill_wait(views: list[InstanceView], now_s: float) -> InstanceView:
    """The instance whose queue drains first (first in id order on ties)."""
    best, best_s = views[0], views[0].predicted_prefill_wait_s(now_s)
    for view in views[1:]:
        wait_s = view.predicted_prefill_wait_s(now_s)
        if wait_s < best_s:
            best, best_s = view, wait_s
    return best


def _decode_load(view: InstanceView) -> tuple[float, int, int]:
    return (view.kv_usage, view.decode_batch + view.decode_waiting, view.instance_id)


def _local_load(view: InstanceView) -> tuple[int, int]:
    return (view.queued_prompt_tokens + view.kv_used_tokens, view.instance_id)


def make(policy: RouterPolicy, choice: str = Choice.LEAST_LOADED) -> StaticRouter:
    """Registry entry point (`planning.routing.make_router`)."""
    return StaticRouter(Choice(choice))
