"""Regions: P and D of one request share a region; arrivals split over regions by demand."""

from __future__ import annotations

from collections import Counter

import pytest

from planning.domain import Phase
from planning.routing import make_router
from planning.routing.base_router import ClusterState, Reject, RoleChange, Route, RouterPolicy
from planning.simulator import SimConfig, SimInstance, run
from planning.simulator.engine import assign_regions
from planning.workload import Request, Workload, make_trace
from tests.planning.simulator.helpers import MODEL, SPEC, perf

# Region "a": a slow prefill and a decode; region "b": a fast prefill and a decode with little
# KV room. Pairing the least-loaded prefill (b) with the emptiest decode (a) would cross regions.
TWO_REGIONS = [
    SimInstance(perf("pa", prefill_s_per_token=4e-4), Phase.PREFILL, "a", "aws"),
    SimInstance(perf("da", kv_capacity_tokens=2_000_000), Phase.DECODE, "a", "aws"),
    SimInstance(perf("pb"), Phase.PREFILL, "b", "aws"),
    SimInstance(perf("db", kv_capacity_tokens=200_000), Phase.DECODE, "b", "aws"),
]
ROWS = [(i * 0.05, 800 + 37 * (i % 11), 40 + 7 * (i % 5)) for i in range(400)]


def _run(policy: str, split: dict[str, dict[str, float]] | None) -> list[tuple[str, str, str]]:
    trace = make_trace("t", ROWS, model=MODEL)
    result = run(
        Workload(trace, (SPEC,)),
        TWO_REGIONS,
        make_router(policy),
        SimConfig(region_split=split),
    )
    assert result.completed == len(ROWS)
    regions = [i.region for i in TWO_REGIONS]
    return [
        (regions[r.prefill_instance] if r.prefill_instance is not None else r.region,
         regions[r.decode_instance], r.region)
        for r in result.per_request
    ]  # fmt: skip


@pytest.mark.parametrize("policy", ["static", "fluidpd", "fluidrole", "fluidtoken"])
@pytest.mark.parametrize("split", [None, {MODEL: {"a": 1.0, "b": 3.0}}])
def test_two_region_plan_never_pairs_across_regions(
    policy: str, split: dict[str, dict[str, float]] | None
) -> None:
    served = _run(policy, split)
    assert all(p == d == region for p, d, region in served)
    if split is not None:  # served where it arrived: 1:3
        counts = Counter(region for _, _, region in served)
        assert counts == {"a": 100, "b": 300}


def test_round_robin_stays_in_one_region() -> None:
    trace = make_trace("t", ROWS[:50], model=MODEL)
    result = run(Workload(trace, (SPEC,)), TWO_REGIONS, make_router("static", choice="round_robin"))
    regions = [i.region for i in TWO_REGIONS]
    for r in result.per_request:
        assert r.prefill_instance is not None
        assert regions[r.prefill_instance] == regions[r.decode_instance]


def test_arrival_split_follows_the_demand_weights_smoothly() -> None:
    reqs = [Request(i, i * 0.1, 100, 10, MODEL if i % 2 else "other") for i in range(1000)]
    split = {MODEL: {"east": 2.0, "west": 1.0, "none": 0.0}, "other": {"x": 5.0}}
    regions = assign_regions(reqs, split)
    mine = [g for q, g in zip(reqs, regions, strict=True) if q.model == MODEL]
    assert Counter(mine) == {"east": 333, "west": 167}
    for n in range(1, len(mine) + 1):  # never more than one request off its share
        assert abs(mine[:n].count("east") - n * 2 / 3) <= 1.0
    assert {g for q, g in zip(reqs, regions, strict=True) if q.model == "other"} == {"x"}
    assert assign_regions(reqs, None) == [None] * len(reqs)
    assert assign_regions(reqs, {"third": {"z": 1.0}}) == [None] * len(reqs)


class _CrossRouter:
    """A buggy router: prefill in region a, decode in region b."""

    policy = RouterPolicy.STATIC
    control_interval_s = 0.0

    def route(self, request: Request, state: ClusterState) -> Route | Reject:
        return Route(decode_instance=3, prefill_instance=0)

    def control(self, state: ClusterState) -> tuple[RoleChange, ...]:
        return ()


def test_driver_rejects_a_cross_region_route() -> None:
    trace = make_trace("t", ROWS[:1], model=MODEL)
    with pytest.raises(ValueError, match="must not cross regions"):
        run(Workload(trace, (SPEC,)), TWO_REGIONS, _CrossRouter())


def test_request_region_without_instances_is_dropped_with_a_reason() -> None:
    trace = make_trace("t", ROWS[:10], model=MODEL)
    result = run(
        Workload(trace, (SPEC,)),
        TWO_REGIONS,
        make_router("static"),
        SimConfig(region_split={MODEL: {"c": 1.0}}),
    )
    assert result.dropped == 10
    assert list(result.drop_reasons) == [f"no accepting instance of {MODEL!r} in 'c'"]


def test_fluidrole_flips_only_within_one_regions_pool() -> None:
    # region a: prefill-starved (1 slow P, 3 D); region b: balanced. Flips stay in a's pool
    # and never leave a region without a role.
    instances = [
        SimInstance(perf("pa", prefill_s_per_token=8e-4), Phase.PREFILL, "a"),
        *[SimInstance(perf(f"da{i}"), Phase.DECODE, "a") for i in range(3)],
        SimInstance(perf("pb"), Phase.PREFILL, "b"),
        SimInstance(perf("db"), Phase.DECODE, "b"),
    ]
    rows = [(i * 0.02, 2000, 20) for i in range(1500)]
    trace = make_trace("t", rows, model=MODEL)
    result = run(
        Workload(trace, (SPEC,)),
        instances,
        make_router("fluidrole", role_window_s=1.0, role_cooldown_s=1.0),
        SimConfig(region_split={MODEL: {"a": 1.0, "b": 1.0}}),
    )
    assert result.role_changes, "the starved region should flip a decode worker"
    assert {instances[c.instance_id].region for c in result.role_changes} == {"a"}
    regions = [i.region for i in instances]
    for r in result.per_request:
        if r.prefill_instance is not None:
            assert regions[r.prefill_instance] == regions[r.decode_instance] == r.region
