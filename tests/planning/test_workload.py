"""Trace slices, Zipf multi-model workloads and per-window summaries."""

from __future__ import annotations

import pytest

from planning.domain import ModelDemand
from planning.workload import (
    ModelSpec,
    demands,
    make_trace,
    multi_model_workload,
    percentile,
    scale_rate,
    summarise,
    time_slice,
    zipf_shares,
)

BASE = make_trace("base", [(float(t), 100 + t, 10 + t) for t in range(10)], duration_s=10.0)


def test_time_slice_starts_at_offset_and_wraps_around() -> None:
    sliced = time_slice(BASE, offset_s=7.0, duration_s=5.0)
    assert [(r.arrival_s, r.input_tokens) for r in sliced.requests] == [
        (0.0, 107),
        (1.0, 108),
        (2.0, 109),
        (3.0, 100),
        (4.0, 101),
    ]
    assert [r.request_id for r in sliced.requests] == list(range(5))


def test_rate_scale_compresses_time_and_tiles() -> None:
    doubled = scale_rate(BASE, 2.0)
    assert len(doubled.requests) == 20
    assert doubled.duration_s == BASE.duration_s
    assert doubled.rate_req_per_s == pytest.approx(2 * BASE.rate_req_per_s)
    assert doubled.requests[1].arrival_s == pytest.approx(0.5)


def test_zipf_shares_sum_to_one_and_follow_one_over_rank() -> None:
    shares = zipf_shares(4, 1.0)
    assert sum(shares) == pytest.approx(1.0)
    assert shares[0] / shares[1] == pytest.approx(2.0) and shares[0] / shares[3] == pytest.approx(
        4.0
    )


def test_multi_model_workload_splits_rate_by_zipf_and_is_seeded() -> None:
    specs = [ModelSpec(f"m{k}", 1.0, 0.05) for k in range(3)]
    dense = make_trace("dense", [(t / 10, 100, 10) for t in range(1000)], duration_s=100.0)
    one = multi_model_workload(dense, specs, total_rate_req_per_s=22.0, duration_s=100.0, seed=1)
    two = multi_model_workload(dense, specs, total_rate_req_per_s=22.0, duration_s=100.0, seed=1)
    assert one == two
    counts = {m: sum(1 for r in one.trace.requests if r.model == m) for m in one.trace.models}
    shares = zipf_shares(3)
    for k, spec in enumerate(specs):
        assert counts[spec.model] == pytest.approx(2200 * shares[k], abs=2)
    arrivals = [r.arrival_s for r in one.trace.requests]
    assert arrivals == sorted(arrivals)


def test_summarise_per_model_per_window() -> None:
    rows = summarise(BASE, window_s=5.0)
    assert [(r.window_start_s, r.requests) for r in rows] == [(0.0, 5), (5.0, 5)]
    first = rows[0]
    assert first.rate_req_per_s == pytest.approx(1.0)
    assert first.mean_input_tokens == pytest.approx(102.0)
    assert first.p90_output_tokens == pytest.approx(percentile([10, 11, 12, 13, 14], 0.9))


def test_demands_are_model_demand_values_with_the_specs_slos() -> None:
    specs = [ModelSpec("a", 0.5, 0.04, "code", 2.0), ModelSpec("b", 2.0, 0.1)]
    dense = make_trace("dense", [(t / 10, 100, 10) for t in range(1000)], duration_s=100.0)
    workload = multi_model_workload(dense, specs, 9.0, 100.0, zipf_exponent=1.0, seed=0)
    out = {d.model: d for d in demands(workload)}
    assert isinstance(out["a"], ModelDemand)
    assert out["a"].rate_req_per_s == pytest.approx(6.0, abs=0.05)
    assert (out["a"].ttft_slo_s, out["a"].workload_class, out["a"].priority) == (0.5, "code", 2.0)
    assert out["b"].mean_input_tokens == pytest.approx(100.0)
