"""FluidPD through the `planning.routing` registry, driven by the simulator."""

from __future__ import annotations

from planning.domain import Phase
from planning.routing import make_router
from planning.routing.fluidpd_router import FluidPDRouter
from planning.routing.instance_perf import InstancePerf
from planning.simulator import SimInstance, SimResult, run
from planning.workload import ModelSpec, Workload, make_trace

MODEL = "m"
SPEC = ModelSpec(MODEL, ttft_slo_s=1.0, tpot_slo_s=0.05)
PERF = InstancePerf(
    name="gpu",
    model=MODEL,
    prefill_s=lambda n, s: 0.005 + n * s * 1e-4,  # ~10k prompt tokens/s
    decode_step_s=lambda b, ctx: 0.01 + b * 1e-4,
    kv_capacity_tokens=400_000,
    kv_bytes_per_token=131_072.0,
    gpus=1,
    usd_per_hr=2.0,
    prefill_token_budget=2048,
)
ONE_P_THREE_D = [SimInstance(PERF, Phase.PREFILL)] + [SimInstance(PERF, Phase.DECODE)] * 3


def prefill_heavy(rate_req_per_s: float = 8.0, seconds: float = 30.0) -> Workload:
    """2,000-token prompts, 20-token answers: ~16k prompt tokens/s against one 10k/s prefill
    worker (a code-completion burst on a deployment sized for chat)."""
    n = int(rate_req_per_s * seconds)
    rows = [(i / rate_req_per_s, 2000, 20) for i in range(n)]
    return Workload(make_trace("burst", rows, duration_s=seconds, model=MODEL), (SPEC,))


def simulate(policy: str, **params: object) -> SimResult:
    return run(prefill_heavy(), ONE_P_THREE_D, make_router(policy, **params))


def test_registry_builds_each_variant_with_the_right_mechanisms():
    token, role, both = (make_router(p) for p in ("fluidtoken", "fluidrole", "fluidpd"))
    assert isinstance(both, FluidPDRouter)
    assert token.params.fluid_token_enabled and not token.params.fluid_role_enabled
    assert role.params.fluid_role_enabled and not role.params.fluid_token_enabled
    assert token.control_interval_s == 0 and role.control_interval_s > 0
    assert make_router("fluidpd", role_window_s=1.5).params.role_window_s == 1.5


def test_fluidpd_beats_static_pd_when_prefill_is_the_bottleneck():
    static = simulate("static")
    fluid = simulate("fluidpd")
    assert static.dropped == fluid.dropped == 0
    assert fluid.completed == static.completed == static.requests
    assert fluid.slo_attainment > static.slo_attainment + 0.2


def test_fluid_token_prefills_locally_and_fluid_role_flips_decoders():
    token = simulate("fluidtoken")
    assert any(r.prefill_instance is None for r in token.per_request)
    assert token.role_changes == ()
    role = simulate("fluidrole", role_window_s=1.0, role_cooldown_s=2.0)
    assert all(r.prefill_instance is not None for r in role.per_request)
    assert role.role_changes and all(c.to_role is Phase.PREFILL for c in role.role_changes)
    kept_decode = sum(1 for i in role.instances if i.final_role is Phase.DECODE)
    assert kept_decode >= 1  # min_decode_instances


def test_runs_are_deterministic():
    a, b = simulate("fluidpd"), simulate("fluidpd")
    assert a.per_request == b.per_request and a.role_changes == b.role_changes
