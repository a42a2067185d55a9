"""FluidPD's pure decisions: P/D vs FluidToken routing, and FluidRole's controller."""

from __future__ import annotations

from dataclasses import replace

import pytest

from planning.routing.fluidpd_params import FluidPDParams
from planning.routing.fluidpd_router import (
    ClusterView,
    NoWorkerAvailable,
    RoleControllerState,
    RoleFlip,
    RouteKind,
    WorkerRole,
    WorkerView,
    route_request,
    step_roles,
)
from planning.routing.pressure import LinearStepModel, WorkerLoad

PERF = LinearStepModel(
    prefill_fixed_s=0.01,
    prefill_s_per_token=1e-4,
    decode_fixed_s=0.01,
    decode_s_per_seq=1e-4,
    decode_s_per_context_token=0.0,
    kv_transfer_s_per_token=0.0,
    kv_capacity_tokens=100_000,
)
P, D = WorkerRole.PREFILL, WorkerRole.DECODE


def worker(wid: str, role: WorkerRole, **load: float) -> WorkerView:
    return WorkerView(wid, role, WorkerLoad(**load), PERF, PERF.kv_capacity_tokens)


def view(*workers: WorkerView) -> ClusterView:
    return ClusterView(tuple(workers), ttft_slo_s=1.0, tpot_slo_s=0.05)


IDLE = view(worker("p0", P), worker("p1", P), worker("d0", D), worker("d1", D))
# 9,000 prompt tokens queued on each prefill worker: a new 1,000-token prompt waits ~1 s.
HOT = view(
    worker("p0", P, queued_prompt_tokens=9000),
    worker("p1", P, queued_prompt_tokens=9500),
    worker("d0", D, running_seqs=30, context_tokens=30_000),
    worker("d1", D, running_seqs=5, context_tokens=5000),
)


def test_idle_cluster_uses_pd_on_the_least_loaded_workers():
    busy_p0 = replace(IDLE, workers=(worker("p0", P, queued_prompt_tokens=500), *IDLE.workers[1:]))
    decision = route_request(busy_p0, 1000, FluidPDParams())
    assert decision.kind is RouteKind.DISAGGREGATED
    assert decision.prefill_worker == "p1" and decision.decode_worker == "d0"


def test_prefill_pressure_sends_the_request_to_the_decode_worker_with_slack():
    decision = route_request(HOT, 1000, FluidPDParams())
    assert decision.kind is RouteKind.FLUID_TOKEN
    assert decision.prefill_worker is None and decision.decode_worker == "d1"
    assert decision.predicted_ttft_s < 0.9


def test_fluid_token_respects_its_switch_its_budget_and_decode_pressure():
    assert route_request(HOT, 1000, FluidPDParams.static()).kind is RouteKind.DISAGGREGATED
    # A prompt too long to prefill in chunks within 0.9 x TTFT SLO stays on P/D.
    assert route_request(HOT, 60_000, FluidPDParams()).kind is RouteKind.DISAGGREGATED
    pressed = FluidPDParams(fluid_token_max_decode_pressure=0.1)
    assert route_request(HOT, 1000, pressed).kind is RouteKind.DISAGGREGATED


def test_unhealthy_and_draining_workers_get_no_new_work():
    workers = (
        replace(IDLE.workers[0], healthy=False),
        IDLE.workers[1],
        replace(IDLE.workers[2], draining_to=P, in_flight_role_work=3),
        IDLE.workers[3],
    )
    decision = route_request(replace(IDLE, workers=workers), 100, FluidPDParams())
    assert (decision.prefill_worker, decision.decode_worker) == ("p1", "d1")
    with pytest.raises(NoWorkerAvailable):
        route_request(view(worker("p0", P)), 100, FluidPDParams())


def test_no_prefill_worker_left_colocates_on_a_decode_worker():
    decision = route_request(view(worker("d0", D)), 100, FluidPDParams.static())
    assert decision.kind is RouteKind.FLUID_TOKEN and decision.decode_worker == "d0"


PARAMS = FluidPDParams(role_window_s=5.0, role_cooldown_s=10.0)
# Prefill workers at p_P ~ 2 (2 s backlog), decode workers nearly idle: sustained imbalance.
IMBALANCED = view(
    worker("p0", P, queued_prompt_tokens=19_000),
    worker("p1", P, queued_prompt_tokens=19_000),
    worker("d0", D, running_seqs=8, context_tokens=8000),
    worker("d1", D, running_seqs=2, context_tokens=2000),
    worker("d2", D, running_seqs=4, context_tokens=4000),
)


def run_ticks(v: ClusterView, params: FluidPDParams, times: list[float]) -> list[RoleFlip]:
    state, flips = RoleControllerState(), []
    for t in times:
        state, out = step_roles(v, state, params, t)
        flips += out
    return flips


def test_flip_waits_for_the_window_then_takes_the_least_loaded_donor():
    assert run_ticks(IMBALANCED, PARAMS, [0.0, 2.0, 4.9]) == []
    assert run_ticks(IMBALANCED, PARAMS, [0.0, 2.0, 5.0]) == [RoleFlip("d1", P, completed=False)]


def test_cooldown_allows_one_flip_per_period():
    flips = run_ticks(IMBALANCED, PARAMS, [0.0, 5.0, 10.0, 14.9])
    assert flips == [RoleFlip("d1", P, completed=False)]
    assert len(run_ticks(IMBALANCED, PARAMS, [0.0, 5.0, 10.0, 15.0])) == 2


def test_hysteresis_keeps_the_window_between_thresholds_and_resets_below():
    mild = view(
        worker("p0", P, queued_prompt_tokens=3500),  # p_P ~ 0.46: gap ~0.3, between off/on
        worker("d0", D, running_seqs=2, context_tokens=2000),
        worker("d1", D, running_seqs=2, context_tokens=2000),
    )
    calm = view(worker("p0", P), worker("d0", D), worker("d1", D))
    hot = replace(mild, workers=(worker("p0", P, queued_prompt_tokens=19_000), *mild.workers[1:]))
    state = RoleControllerState()
    state, _ = step_roles(hot, state, PARAMS, 0.0)
    state, _ = step_roles(mild, state, PARAMS, 3.0)  # between thresholds: the window stays open
    state, flips = step_roles(hot, state, PARAMS, 5.0)
    assert flips == (RoleFlip("d0", P, completed=False),)
    state = RoleControllerState()
    state, _ = step_roles(hot, state, PARAMS, 0.0)
    state, _ = step_roles(calm, state, PARAMS, 3.0)  # below off: reset
    state, flips = step_roles(hot, state, PARAMS, 5.0)
    assert flips == () and state.imbalance_since_s == 5.0


def test_minimum_count_and_donor_pressure_block_a_flip():
    two = view(worker("p0", P, queued_prompt_tokens=19_000), worker("d0", D))
    assert run_ticks(two, PARAMS, [0.0, 5.0]) == []
    # decode donors already at ~0.6 each: losing one of two projects ~1.2 > 0.9
    loaded = view(
        worker("p0", P, queued_prompt_tokens=30_000),
        worker("d0", D, running_seqs=200, context_tokens=20_000),
        worker("d1", D, running_seqs=200, context_tokens=20_000),
    )
    assert run_ticks(loaded, PARAMS, [0.0, 5.0]) == []
    assert run_ticks(IMBALANCED, FluidPDParams(fluid_role_enabled=False), [0.0, 5.0]) == []


def test_decode_overload_flips_a_prefill_worker_the_other_way():
    decode_hot = view(
        worker("p0", P),
        worker("p1", P, queued_prompt_tokens=1000),
        worker("d0", D, running_seqs=10, context_tokens=88_000),  # KV near the watermark
    )
    assert run_ticks(decode_hot, PARAMS, [0.0, 5.0]) == [RoleFlip("p0", D, completed=False)]


def test_drained_flip_completes_and_busy_one_waits():
    drained = replace(IMBALANCED.workers[3], draining_to=P, in_flight_role_work=0)  # d1
    busy = replace(IMBALANCED.workers[4], draining_to=P, in_flight_role_work=2)  # d2
    v = replace(IMBALANCED, workers=(*IMBALANCED.workers[:3], drained, busy))
    _, flips = step_roles(v, RoleControllerState(), PARAMS, 0.0)
    assert flips == (RoleFlip("d1", P, completed=True),)
    # while a flip drains, no second one starts even with the window long elapsed
    state = RoleControllerState(overloaded=P, imbalance_since_s=0.0)
    assert step_roles(replace(v, workers=(*v.workers[:3], busy)), state, PARAMS, 60.0)[1] == ()
