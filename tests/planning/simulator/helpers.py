"""Closed-form instance perf for simulator tests."""

from __future__ import annotations

from planning.domain import Phase
from planning.routing import make_router
from planning.routing.instance_perf import InstancePerf
from planning.simulator import SimConfig, SimInstance, SimResult, run
from planning.workload import ModelSpec, Workload, make_trace

MODEL = "m"
SPEC = ModelSpec(MODEL, ttft_slo_s=1.0, tpot_slo_s=0.05)


def perf(
    name: str = "i",
    prefill_s_per_token: float = 1e-4,
    prefill_fixed_s: float = 0.02,
    step_s: float = 0.01,
    step_s_per_seq: float = 0.0,
    kv_capacity_tokens: int = 1_000_000,
    kv_bytes_per_token: float = 131_072.0,
    max_batch: int = 256,
    prefill_token_budget: int = 8192,
) -> InstancePerf:
    """prefill(n, s) = fixed + n*s*per_token; step(b, ctx) = step_s + b*step_s_per_seq."""
    return InstancePerf(
        name=name,
        model=MODEL,
        prefill_s=lambda n, s: prefill_fixed_s + n * s * prefill_s_per_token,
        decode_step_s=lambda b, ctx: step_s + b * step_s_per_seq,
        kv_capacity_tokens=kv_capacity_tokens,
        kv_bytes_per_token=kv_bytes_per_token,
        gpus=1,
        usd_per_hr=2.0,
        max_batch=max_batch,
        prefill_token_budget=prefill_token_budget,
    )


def simulate(
    rows: list[tuple[float, int, int]],
    instances: list[SimInstance],
    duration_s: float | None = None,
    policy: str = "static",
    config: SimConfig | None = None,
) -> SimResult:
    trace = make_trace("t", rows, duration_s=duration_s, model=MODEL)
    return run(Workload(trace, (SPEC,)), instances, make_router(policy), config)


def pd(prefill: InstancePerf, decode: InstancePerf) -> list[SimInstance]:
    return [SimInstance(prefill, Phase.PREFILL), SimInstance(decode, Phase.DECODE)]
