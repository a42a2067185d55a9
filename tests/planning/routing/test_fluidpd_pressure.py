"""Pressure indicators and FluidToken's budget against hand-computed values."""

from __future__ import annotations

import math

import pytest

from planning.routing.fluidpd_params import FluidPDParams
from planning.routing.pressure import (
    LinearStepModel,
    WorkerLoad,
    decode_pressure,
    fluid_token_chunk_tokens,
    predicted_ttft_local_s,
    prefill_pressure,
)

PERF = LinearStepModel(
    prefill_fixed_s=0.01,
    prefill_s_per_token=1e-4,
    decode_fixed_s=0.01,
    decode_s_per_seq=1e-4,
    decode_s_per_context_token=0.0,
    kv_transfer_s_per_token=1e-5,
    kv_capacity_tokens=100_000,
)


def test_prefill_pressure_is_predicted_ttft_over_slo():
    load = WorkerLoad(queued_prompt_tokens=4000)
    # prefill of 4000 queued + 1000 new tokens = 0.01 + 0.5 s; transfer of 1000 tokens 0.01 s
    assert prefill_pressure(load, 1000, PERF, ttft_slo_s=1.0) == pytest.approx(0.52)
    assert prefill_pressure(load, 1000, PERF, ttft_slo_s=0.26) == pytest.approx(2.0)


def test_decode_pressure_takes_the_worse_of_kv_and_tpot():
    # TPOT at batch 11 (10 running + the new one): 0.01 + 11e-4 = 0.0111 s over 0.05 s SLO
    light = WorkerLoad(running_seqs=10, context_tokens=9000)
    assert decode_pressure(light, PERF, 0.05, 0.9, 100_000) == pytest.approx(0.222)
    # 81,000 of 100,000 KV tokens used at a 0.9 watermark: 0.9 beats the TPOT term
    full = WorkerLoad(running_seqs=10, context_tokens=81_000)
    assert decode_pressure(full, PERF, 0.05, 0.9, 100_000) == pytest.approx(0.9)
    # the engine's own KV figure, when known, wins over the accounted tokens
    measured = WorkerLoad(running_seqs=10, context_tokens=9000, kv_usage_frac=0.45)
    assert decode_pressure(measured, PERF, 0.05, 0.9, 100_000) == pytest.approx(0.5)


def test_fluid_token_chunk_is_the_largest_that_keeps_the_step_in_budget():
    load = WorkerLoad(running_seqs=20, context_tokens=20_000)
    base = PERF.decode_step_s(20, 20_000)  # 0.012 s
    # share 0.5 of a 0.05 s SLO: chunk time <= 0.025 s -> 250 tokens (within 1 % tolerance)
    chunk = fluid_token_chunk_tokens(load, PERF, 0.05, 0.5)
    assert 245 <= chunk <= 250
    assert PERF.decode_step_s(20, 20_000, chunk) <= base + 0.025
    # share 1.0: bounded by the TPOT SLO itself: 0.012 + c * 1e-4 <= 0.05 -> 380 tokens
    assert 376 <= fluid_token_chunk_tokens(load, PERF, 0.05, 1.0) <= 380
    # no slack at all: a step already over the SLO admits no chunk
    busy = WorkerLoad(running_seqs=500, context_tokens=0)
    assert fluid_token_chunk_tokens(busy, PERF, 0.05, 0.5) == 0


def test_local_ttft_counts_the_steps_behind_queued_local_prefill():
    load = WorkerLoad(queued_prompt_tokens=300, running_seqs=0)
    step = PERF.decode_step_s(1, 0, 200)
    assert predicted_ttft_local_s(load, 500, PERF, 200) == pytest.approx(4 * step)
    assert predicted_ttft_local_s(load, 500, PERF, 0) == math.inf


def test_params_round_trip_and_validation():
    params = FluidPDParams(role_window_s=2.0)
    assert FluidPDParams.from_dict(params.to_dict()) == params
    with pytest.raises(ValueError, match="unknown"):
        FluidPDParams.from_dict({"window": 1})
    with pytest.raises(ValueError, match="hysteresis"):
        FluidPDParams(role_imbalance_on=0.2, role_imbalance_off=0.3)
    with pytest.raises(ValueError):
        FluidPDParams(min_decode_instances=0)
    static = FluidPDParams.static()
    assert not static.fluid_token_enabled and not static.fluid_role_enabled
