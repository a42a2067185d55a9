"""Closed-form checks of the discrete-event simulator."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pytest

from planning.domain import Phase
from planning.routing.base_router import ClusterState, RoleChange, Route, RouterPolicy
from planning.routing.instance_perf import InstancePerf
from planning.simulator import SimConfig, SimInstance, run
from planning.workload import Request, Workload, make_trace
from tests.planning.simulator.helpers import MODEL, SPEC, pd, perf, simulate

LINK_GBPS = 400.0


def transfer_s(prompt_tokens: int, kv_bytes_per_token: float = 131_072.0) -> float:
    return prompt_tokens * kv_bytes_per_token * 8 / (LINK_GBPS * 1e9)


def test_single_request_low_load_ttft_is_prefill_plus_transfer_and_tpot_is_step() -> None:
    result = simulate([(0.0, 1000, 11)], pd(perf("p"), perf("d", step_s=0.013)), duration_s=10)
    (req,) = result.per_request
    assert req.ttft_s == pytest.approx(0.02 + 1000 * 1e-4 + transfer_s(1000))
    assert req.tpot_s == pytest.approx(0.013)
    assert req.e2e_s == pytest.approx(req.ttft_s + 10 * 0.013)
    assert (req.prefill_instance, req.decode_instance) == (0, 1)
    assert result.slo_attainment == 1.0


def test_link_bandwidth_enters_ttft() -> None:
    rows = [(0.0, 4000, 2)]
    fast = simulate(rows, pd(perf(), perf()), config=SimConfig(link_gbps=400))
    slow = simulate(rows, pd(perf(), perf()), config=SimConfig(link_gbps=10))
    gap_s = slow.per_request[0].ttft_s - fast.per_request[0].ttft_s
    assert gap_s == pytest.approx(4000 * 131_072 * 8 * (1 / 10e9 - 1 / 400e9))


def test_colocated_instance_prefills_in_chunks_then_decodes() -> None:
    instances = [SimInstance(perf("c", prefill_token_budget=512), Phase.COLOCATED)]
    result = simulate([(0.0, 1000, 5)], instances, duration_s=10)
    (req,) = result.per_request
    # two chunk steps (512 + 488 tokens), each a prefill of the chunk; first token after the second
    assert req.ttft_s == pytest.approx((0.02 + 512e-4) + (0.02 + 488e-4))
    assert req.tpot_s == pytest.approx(0.01)
    assert req.prefill_instance is None


def test_step_time_follows_batch_when_requests_overlap() -> None:
    # A (101 tokens) decodes alone at 10 ms/step; B (11 tokens) joins at the next step boundary
    # after its KV lands: 20 ms/step for 10 steps; A's finish is pushed back by 10 x 10 ms.
    d = perf("d", step_s=0.0, step_s_per_seq=0.01)
    result = simulate([(0.0, 100, 101), (0.305, 100, 11)], pd(perf("p"), d), duration_s=5)
    a, b = result.per_request
    a_first_s = a.arrival_s + a.ttft_s
    assert a.e2e_s - a.ttft_s == pytest.approx(100 * 0.01 + 10 * 0.01)
    b_first_s = b.arrival_s + b.ttft_s
    join_s = a_first_s + math.ceil((b_first_s - a_first_s) / 0.01 - 1e-9) * 0.01
    assert b.arrival_s + b.e2e_s == pytest.approx(join_s + 10 * 0.02)


def test_queueing_appears_when_arrivals_pass_prefill_capacity() -> None:
    # One prefill instance: 0.02 + 0.2 s per 2000-token prompt, batch budget 2000 -> ~4.5 req/s.
    def ttft_tail(rate: float) -> float:
        rows = [(i / rate, 2000, 2) for i in range(200)]
        p = perf("p", prefill_token_budget=2000)
        result = simulate(rows, pd(p, perf("d")))
        return sum(r.ttft_s for r in result.per_request[-20:]) / 20

    assert ttft_tail(2.0) == pytest.approx(0.22 + transfer_s(2000))
    assert ttft_tail(8.0) > 5.0  # the queue grows by ~0.1 s per request


def test_prefill_batches_under_token_budget() -> None:
    rows = [(0.0, 1000, 2), (0.0, 1000, 2), (0.0, 1000, 2)]
    result = simulate(rows, pd(perf("p", prefill_token_budget=2000), perf("d")))
    first, second, third = result.per_request
    # the first starts alone on the idle instance; the other two wait and share one batch
    assert first.ttft_s == pytest.approx(0.12 + transfer_s(1000))
    assert second.ttft_s == pytest.approx(third.ttft_s)
    assert second.ttft_s == pytest.approx(0.12 + 0.22 + transfer_s(1000))


def test_pipeline_stages_issue_at_slowest_stage_and_finish_after_all() -> None:
    two_stage = InstancePerf(
        name="pp2",
        model=MODEL,
        prefill_s=lambda n, s: 0.3,  # 0.1 + 0.2 through both stages
        prefill_interval_s=lambda n, s: 0.2,  # the slower stage
        decode_step_s=lambda b, c: 0.01,
        kv_capacity_tokens=10**6,
        kv_bytes_per_token=0.0,
        gpus=2,
        usd_per_hr=4.0,
        prefill_token_budget=100,
    )
    result = simulate([(0.0, 100, 2), (0.0, 100, 2)], pd(two_stage, perf("d")))
    first, second = result.per_request
    assert first.ttft_s == pytest.approx(0.3)
    assert second.ttft_s == pytest.approx(0.2 + 0.3)


def test_kv_capacity_bounds_the_decode_batch() -> None:
    # room for two requests of 100 + 50 tokens: the third's KV moves only after one finishes
    rows = [(0.0, 100, 50), (0.0, 100, 50), (0.0, 100, 50)]

    def third_first_token_after_first_finish_s(kv_capacity_tokens: int) -> float:
        d = perf("d", kv_capacity_tokens=kv_capacity_tokens)
        result = simulate(rows, pd(perf("p", prefill_token_budget=10_000), d))
        first, _, third = result.per_request
        return (third.arrival_s + third.ttft_s) - (first.arrival_s + first.e2e_s)

    assert third_first_token_after_first_finish_s(300) == pytest.approx(transfer_s(100))
    assert third_first_token_after_first_finish_s(450) < -0.3


def test_conservation_drops_what_can_never_fit_and_completes_the_rest() -> None:
    rows = [(i * 0.05, 100 + 10 * i, 5 + i) for i in range(50)] + [(1.0, 5000, 10)]
    result = simulate(rows, pd(perf("p"), perf("d", kv_capacity_tokens=4000)))
    assert result.completed + result.dropped + result.unfinished == result.requests == 51
    assert result.dropped == 1 and result.unfinished == 0
    assert list(result.drop_reasons.values()) == [1]


def test_horizon_leaves_requests_unfinished_and_counts_them() -> None:
    rows = [(0.0, 100, 1000)]
    result = simulate(rows, pd(perf(), perf()), config=SimConfig(horizon_s=1.0))
    assert result.unfinished == 1 and result.completed == 0 and result.slo_attainment == 0.0


def test_same_seed_same_results() -> None:
    rows = [((i * 7919) % 1000 / 100.0, 50 + (i * 31) % 900, 2 + (i * 17) % 60) for i in range(300)]
    instances = [
        SimInstance(perf("p0"), Phase.PREFILL),
        SimInstance(perf("p1", prefill_s_per_token=2e-4), Phase.PREFILL),
        SimInstance(perf("d0", step_s_per_seq=1e-3), Phase.DECODE),
        SimInstance(perf("d1", step_s_per_seq=2e-3, kv_capacity_tokens=5000), Phase.DECODE),
    ]
    one = simulate(rows, instances, config=SimConfig(seed=3))
    two = simulate(rows, instances, config=SimConfig(seed=3))
    assert one == two
    assert one.completed == 300


def test_cost_and_gpu_hours_cover_every_instance_for_the_makespan() -> None:
    result = simulate([(0.0, 100, 2)], pd(perf(), perf()), duration_s=3600)
    assert result.gpu_hours == pytest.approx(2.0)
    assert result.cost_usd == pytest.approx(4.0)
    assert 0 < result.mean_utilisation < 0.01


@dataclass
class FlipFirstPrefill:
    """Test router: P/D on the first accepting pair; at the first tick flips instance 0."""

    flipped: bool = False

    @property
    def policy(self) -> RouterPolicy:
        return RouterPolicy.FLUIDROLE

    @property
    def control_interval_s(self) -> float:
        return 0.5

    def route(self, request: Request, state: ClusterState) -> Route:
        prefill = [v for v in state.instances if v.role is Phase.PREFILL and v.accepting]
        decode = [v for v in state.instances if v.role is Phase.DECODE and v.accepting]
        return Route(decode[0].instance_id, prefill[0].instance_id)

    def control(self, state: ClusterState) -> tuple[RoleChange, ...]:
        if self.flipped:
            return ()
        self.flipped = True
        return (RoleChange(0, Phase.DECODE),)


def test_role_change_waits_for_drain_then_flips() -> None:
    instances = [
        SimInstance(perf("p0", prefill_token_budget=2000), Phase.PREFILL),
        SimInstance(perf("p1"), Phase.PREFILL),
        SimInstance(perf("d"), Phase.DECODE),
    ]
    rows = [(0.0, 2000, 3), (0.01, 2000, 3), (0.02, 2000, 3), (0.02, 2000, 3), (2.0, 10, 3)]
    trace = make_trace("t", rows, model=MODEL)
    result = run(Workload(trace, (SPEC,)), instances, FlipFirstPrefill())
    (change,) = result.role_changes
    assert (change.instance_id, change.from_role, change.to_role) == (
        0,
        Phase.PREFILL,
        Phase.DECODE,
    )
    assert change.requested_s == pytest.approx(0.5)
    assert change.at_s == pytest.approx(4 * 0.22)  # its four queued prefills drain first
    assert result.per_request[-1].prefill_instance == 1  # the late request avoids instance 0
    assert result.instances[0].final_role is Phase.DECODE
