"""FluidPD: P/D routing with FluidToken and FluidRole, as pure functions over a cluster view.

The same functions run in the simulator and in the live router (`deploy.router`): each side
builds a `ClusterView` (per-worker load from its own accounting, plus measured KV usage where it
has it) and applies the decisions it gets back.

- `route_request(view, prompt_tokens, params)`: where one new request goes. Normally P/D
  (the least-loaded prefill worker by predicted TTFT, then the decode worker with the lowest
  pressure). FluidToken: when the P/D path's predicted TTFT reaches `fluid_token_trigger_pressure`
  × SLO, a decode worker whose pressure is below `fluid_token_max_decode_pressure` takes the whole
  request (local chunked prefill, no KV transfer) if, with the per-step chunk its TPOT slack
  allows, the prompt is prefilled within `fluid_token_ttft_margin` × TTFT SLO and sooner than
  via P/D.
- `step_roles(view, state, params, now_s)`: FluidRole's controller. Tracks the imbalance
  p_P − p_D of the accepting workers; when it stays beyond `role_imbalance_on` for
  `role_window_s` (resetting only below `role_imbalance_off`: hysteresis), no flip happened in
  `role_cooldown_s`, the donor side keeps its minimum count and its projected pressure after
  losing a worker stays below `role_donor_max_pressure`, it starts draining the donor side's
  least-loaded worker. A draining worker takes no new work of its old role; once its in-flight
  work of that role is zero the controller completes the flip.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from enum import StrEnum

from planning.domain import Phase
from planning.routing.base_router import (
    ClusterState,
    Reject,
    RoleChange,
    Route,
    RouterPolicy,
)
from planning.routing.fluidpd_params import FluidPDParams
from planning.routing.instance_perf import InstancePerf
from planning.routing.pressure import (
    StepLatencyModel,
    WorkerLoad,
    decode_pressure,
    fluid_token_chunk_tokens,
    kv_usage,
    predicted_ttft_local_s,
    predicted_ttft_pd_s,
)
from planning.routing.static_router import StaticRouter
from planning.workload import Request


class WorkerRole(StrEnum):
    PREFILL = "prefill"
    DECODE = "decode"

    @property
    def other(self) -> WorkerRole:
        return WorkerRole.DECODE if self is WorkerRole.PREFILL else WorkerRole.PREFILL


class RouteKind(StrEnum):
    DISAGGREGATED = "pd"  # prefill on a prefill worker, KV transfer, decode on a decode worker
    FLUID_TOKEN = "fluid_token"  # whole request on one decode worker (local chunked prefill)


@dataclass(frozen=True, slots=True)
class WorkerView:
    """One worker as the policy sees it.

    `draining_to`: the role it is flipping to (no new work of `role` while set);
    `in_flight_role_work`: requests of its current role still running on it (for the drain);
    `healthy`: False excludes it from routing (dead or timed out recently).
    """

    worker_id: str
    role: WorkerRole
    load: WorkerLoad
    perf: StepLatencyModel
    kv_capacity_tokens: int
    draining_to: WorkerRole | None = None
    in_flight_role_work: int = 0
    healthy: bool = True

    @property
    def accepting(self) -> bool:
        return self.healthy and self.draining_to is None


@dataclass(frozen=True, slots=True)
class ClusterView:
    """All workers of one model's P/D deployment plus its SLOs (seconds)."""

    workers: tuple[WorkerView, ...]
    ttft_slo_s: float
    tpot_slo_s: float

    def accepting(self, role: WorkerRole) -> tuple[WorkerView, ...]:
        return tuple(w for w in self.workers if w.role is role and w.accepting)

    def counted(self, role: WorkerRole) -> int:
        """Workers that hold `role` after pending flips complete."""
        return sum(1 for w in self.workers if (w.draining_to or w.role) is role)


@dataclass(frozen=True, slots=True)
class RouteDecision:
    """Where a request goes. `prefill_worker` is None for FluidToken (local prefill)."""

    kind: RouteKind
    prefill_worker: str | None
    decode_worker: str
    predicted_ttft_s: float


class NoWorkerAvailable(RuntimeError):
    """No healthy accepting decode worker: the request cannot be placed now."""


def worker_prefill_pressure(w: WorkerView, view: ClusterView, prompt_tokens: float) -> float:
    return predicted_ttft_pd_s(w.load, prompt_tokens, w.perf) / view.ttft_slo_s


def worker_decode_pressure(w: WorkerView, view: ClusterView, params: FluidPDParams) -> float:
    return decode_pressure(
        w.load, w.perf, view.tpot_slo_s, params.kv_high_watermark, w.kv_capacity_tokens
    )


def route_request(view: ClusterView, prompt_tokens: int, params: FluidPDParams) -> RouteDecision:
    """Choose P/D or FluidToken, and the workers, for one request of `prompt_tokens`."""
    decoders = view.accepting(WorkerRole.DECODE)
    if not decoders:
        raise NoWorkerAvailable("no healthy decode worker accepts new requests")
    pressure = {w.worker_id: worker_decode_pressure(w, view, params) for w in decoders}
    decode = min(decoders, key=lambda w: pressure[w.worker_id])
    prefillers = view.accepting(WorkerRole.PREFILL)
    pd: RouteDecision | None = None
    if prefillers:
        best = min(prefillers, key=lambda w: predicted_ttft_pd_s(w.load, prompt_tokens, w.perf))
        ttft = predicted_ttft_pd_s(best.load, prompt_tokens, best.perf)
        pd = RouteDecision(RouteKind.DISAGGREGATED, best.worker_id, decode.worker_id, ttft)
        if (
            not params.fluid_token_enabled
            or ttft < params.fluid_token_trigger_pressure * view.ttft_slo_s
        ):
            return pd
    local = _fluid_token_route(view, decoders, pressure, prompt_tokens, params)
    if local is not None and (pd is None or local.predicted_ttft_s < pd.predicted_ttft_s):
        return local
    if pd is not None:
        return pd
    # No prefill worker at all (all dead or draining): colocate on the least-pressed decoder.
    return RouteDecision(RouteKind.FLUID_TOKEN, None, decode.worker_id, math.inf)


def _fluid_token_route(
    view: ClusterView,
    decoders: tuple[WorkerView, ...],
    pressure: dict[str, float],
    prompt_tokens: int,
    params: FluidPDParams,
) -> RouteDecision | None:
    """The decode worker that prefills this prompt locally soonest within the budget, if any."""
    best: RouteDecision | None = None
    for w in decoders:
        if pressure[w.worker_id] >= params.fluid_token_max_decode_pressure:
            continue
        if w.kv_capacity_tokens and (
            kv_usage(w.load, w.kv_capacity_tokens) + prompt_tokens / w.kv_capacity_tokens
            > params.kv_high_watermark
        ):
            continue
        chunk = fluid_token_chunk_tokens(
            w.load, w.perf, view.tpot_slo_s, params.fluid_token_max_step_share
        )
        ttft = predicted_ttft_local_s(w.load, prompt_tokens, w.perf, chunk)
        if ttft > params.fluid_token_ttft_margin * view.ttft_slo_s:
            continue
        if best is None or ttft < best.predicted_ttft_s:
            best = RouteDecision(RouteKind.FLUID_TOKEN, None, w.worker_id, ttft)
    return best


@dataclass(frozen=True, slots=True)
class RoleFlip:
    """Start (`completed=False`) or finish (`completed=True`) moving a worker to `to_role`."""

    worker_id: str
    to_role: WorkerRole
    completed: bool


@dataclass(frozen=True, slots=True)
class RoleControllerState:
    """FluidRole's memory between ticks: the open imbalance window and the last flip time."""

    overloaded: WorkerRole | None = None
    imbalance_since_s: float | None = None
    last_flip_s: float = -math.inf


@dataclass(frozen=True, slots=True)
class Pressures:
    """Mean pressure of each role's accepting workers (0 when a role has none)."""

    prefill: float
    decode: float


def cluster_pressures(view: ClusterView, params: FluidPDParams) -> Pressures:
    """p_P (for a probe prompt of `probe_prompt_tokens`) and p_D, averaged over workers."""
    pre = [
        worker_prefill_pressure(w, view, params.probe_prompt_tokens)
        for w in view.accepting(WorkerRole.PREFILL)
    ]
    dec = [worker_decode_pressure(w, view, params) for w in view.accepting(WorkerRole.DECODE)]
    return Pressures(
        prefill=sum(pre) / len(pre) if pre else 0.0,
        decode=sum(dec) / len(dec) if dec else 0.0,
    )


def step_roles(
    view: ClusterView, state: RoleControllerState, params: FluidPDParams, now_s: float
) -> tuple[RoleControllerState, tuple[RoleFlip, ...]]:
    """One FluidRole tick: finish drained flips, update the imbalance window, maybe start one."""
    done = tuple(
        RoleFlip(w.worker_id, w.draining_to, completed=True)
        for w in view.workers
        if w.draining_to is not None and w.in_flight_role_work == 0
    )
    if not params.fluid_role_enabled:
        return state, done
    state = _update_window(state, cluster_pressures(view, params), params, now_s)
    start = _maybe_start_flip(view, state, params, now_s)
    if start is None:
        return state, done
    flipped = RoleControllerState(overloaded=None, imbalance_since_s=None, last_flip_s=now_s)
    return flipped, (*done, start)


def _update_window(
    state: RoleControllerState, p: Pressures, params: FluidPDParams, now_s: float
) -> RoleControllerState:
    gap = p.prefill - p.decode
    side = WorkerRole.PREFILL if gap > 0 else WorkerRole.DECODE
    if abs(gap) < params.role_imbalance_off:
        return replace(state, overloaded=None, imbalance_since_s=None)
    if abs(gap) >= params.role_imbalance_on and state.overloaded is not side:
        return replace(state, overloaded=side, imbalance_since_s=now_s)
    return state  # between the thresholds, or the same side still overloaded: keep the window


def _maybe_start_flip(
    view: ClusterView, state: RoleControllerState, params: FluidPDParams, now_s: float
) -> RoleFlip | None:
    if state.overloaded is None or state.imbalance_since_s is None:
        return None
    if now_s - state.imbalance_since_s < params.role_window_s:
        return None
    if now_s - state.last_flip_s < params.role_cooldown_s:
        return None
    if any(w.draining_to is not None for w in view.workers):
        return None  # one flip at a time: observe its effect first
    donor_role = state.overloaded.other
    minimum = (
        params.min_prefill_instances
        if donor_role is WorkerRole.PREFILL
        else params.min_decode_instances
    )
    donors = view.accepting(donor_role)
    if view.counted(donor_role) - 1 < minimum or not donors:
        return None
    pressure = {w.worker_id: _pressure_of(w, view, params) for w in donors}
    projected = sum(pressure.values()) / (len(donors) - 1) if len(donors) > 1 else math.inf
    if projected >= params.role_donor_max_pressure:
        return None
    donor = min(donors, key=lambda w: pressure[w.worker_id])
    return RoleFlip(donor.worker_id, state.overloaded, completed=False)


def _pressure_of(w: WorkerView, view: ClusterView, params: FluidPDParams) -> float:
    if w.role is WorkerRole.PREFILL:
        return worker_prefill_pressure(w, view, params.probe_prompt_tokens)
    return worker_decode_pressure(w, view, params)


# --- The `planning.routing` plug-in: FluidPD behind the `base_router.Router` contract. ---------


@dataclass(frozen=True, slots=True)
class InstancePerfModel:
    """`StepLatencyModel` over the simulator's `InstancePerf` and the P->D link.

    Prefill of a token queue runs in batches of the instance's token budget. A prefill chunk
    piggy-backed on a decode step costs its prefill time minus that of a one-token prefill: the
    weights are read once per step either way (roofline: the decode step already pays them).
    """

    perf: InstancePerf
    kv_s_per_token: float

    def prefill_s(self, prompt_tokens: float) -> float:
        if prompt_tokens <= 0:
            return 0.0
        budget = self.perf.prefill_token_budget
        full, rest = divmod(prompt_tokens, budget)
        total = full * self.perf.prefill_s(1, float(budget)) if full else 0.0
        return total + (self.perf.prefill_s(1, rest) if rest else 0.0)

    def decode_step_s(
        self, batch: int, context_tokens: float, prefill_tokens: float = 0.0
    ) -> float:
        step = self.perf.decode_step_s(batch, max(context_tokens / batch, 1.0)) if batch else 0.0
        if prefill_tokens <= 0:
            return step
        return step + self.perf.prefill_s(1, prefill_tokens)

    def kv_transfer_s(self, prompt_tokens: float) -> float:
        return prompt_tokens * self.kv_s_per_token

    def max_chunk_tokens(self, batch: int) -> int:
        return max(self.perf.prefill_token_budget - batch, 0)


_ROLE_OF_PHASE = {Phase.PREFILL: WorkerRole.PREFILL, Phase.DECODE: WorkerRole.DECODE}
_PHASE_OF_ROLE = {WorkerRole.PREFILL: Phase.PREFILL, WorkerRole.DECODE: Phase.DECODE}


def cluster_view(state: ClusterState, model: str, region: str | None = None) -> ClusterView:
    """The FluidPD view of one model's P/D instances in a simulator/router `ClusterState`;
    only those in `region` when it is given (a P/D pool never spans regions)."""
    spec = state.specs[model]
    workers = []
    for v in state.of_model(model, region):
        if v.role not in _ROLE_OF_PHASE:
            continue  # colocated instances are not part of a P/D pool
        kv_s = state.kv_transfer_s(v, 1)
        workers.append(
            WorkerView(
                worker_id=str(v.instance_id),
                role=_ROLE_OF_PHASE[v.role],
                load=WorkerLoad(
                    queued_prompt_tokens=v.queued_prompt_tokens,
                    running_seqs=v.decode_batch + v.decode_waiting,
                    context_tokens=v.mean_context_tokens * (v.decode_batch + v.decode_waiting),
                    kv_usage_frac=v.kv_usage,
                ),
                perf=InstancePerfModel(v.perf, kv_s),
                kv_capacity_tokens=v.kv_capacity_tokens,
                draining_to=_ROLE_OF_PHASE.get(v.pending_role) if v.pending_role else None,
            )
        )
    return ClusterView(tuple(workers), spec.ttft_slo_s, spec.tpot_slo_s)


class FluidPDRouter:
    """FluidPD as a `base_router.Router`: keeps one FluidRole window per (model, region) pool
    (private history; its outputs depend only on the calls received). Counts its decisions.
    A request is routed in its region's pool (`state.region`), else in the pool with the
    lowest predicted TTFT."""

    __slots__ = ("_policy", "_role_state", "control_interval_s", "decisions", "params")

    def __init__(
        self, policy: RouterPolicy, params: FluidPDParams, control_interval_s: float = 0.5
    ) -> None:
        self._policy = policy
        self.params = params
        self.control_interval_s = control_interval_s if params.fluid_role_enabled else 0.0
        self._role_state: dict[tuple[str, str], RoleControllerState] = {}
        self.decisions: dict[str, int] = {k.value: 0 for k in RouteKind} | {"flip": 0}

    @property
    def policy(self) -> RouterPolicy:
        return self._policy

    def route(self, request: Request, state: ClusterState) -> Route | Reject:
        regions = (state.region,) if state.region is not None else state.regions_of(request.model)
        best: RouteDecision | None = None
        for region in regions:  # one pool per region; the request's own when it has one
            view = cluster_view(state, request.model, region)
            if not view.accepting(WorkerRole.DECODE):
                continue
            try:
                decision = route_request(view, request.input_tokens, self.params)
            except NoWorkerAvailable:
                continue
            if best is None or decision.predicted_ttft_s < best.predicted_ttft_s:
                best = decision
        if best is None:
            return StaticRouter().route(request, state)  # colocated-only or no decode pool
        decision = best
        self.decisions[decision.kind.value] += 1
        prefill = int(decision.prefill_worker) if decision.prefill_worker is not None else None
        return Route(decode_instance=int(decision.decode_worker), prefill_instance=prefill)

    def control(self, state: ClusterState) -> tuple[RoleChange, ...]:
        changes: list[RoleChange] = []
        for model in state.specs:
            for region in state.regions_of(model):  # FluidRole flips within one region's pool
                view = cluster_view(state, model, region)
                if not view.workers:
                    continue
                key = (model, region)
                before = self._role_state.get(key, RoleControllerState())
                after, flips = step_roles(view, before, self.params, state.now_s)
                self._role_state[key] = after
                for flip in flips:
                    if not flip.completed:  # the driver completes drained flips itself
                        to_role = _PHASE_OF_ROLE[flip.to_role]
                        changes.append(RoleChange(int(flip.worker_id), to_role))
        self.decisions["flip"] += len(changes)
        return tuple(changes)


def params_for(policy: RouterPolicy, params: FluidPDParams) -> FluidPDParams:
    """The parameters a policy variant runs with: FluidToken-only and FluidRole-only switch the
    other mechanism off; FluidPD keeps both as given."""
    if policy is RouterPolicy.FLUIDTOKEN:
        return replace(params, fluid_token_enabled=True, fluid_role_enabled=False)
    if policy is RouterPolicy.FLUIDROLE:
        return replace(params, fluid_token_enabled=False, fluid_role_enabled=True)
    return params


def make(
    policy: RouterPolicy,
    params: FluidPDParams | dict[str, object] | None = None,
    control_interval_s: float = 0.5,
    **overrides: object,
) -> FluidPDRouter:
    """Registry entry point (`planning.routing.make_router`): `params` as a value or a dict,
    plus single parameters as keywords (`make_router("fluidpd", role_window_s=2.0)`)."""
    base = params if isinstance(params, FluidPDParams) else FluidPDParams.from_dict(params or {})
    if overrides:
        base = base.with_updates(**overrides)
    return FluidPDRouter(policy, params_for(policy, base), control_interval_s)
