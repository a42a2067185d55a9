"""Pure per-plan cost computations on hand-sized values (no catalog)."""

from __future__ import annotations

from reports.cost import (
    UNATTRIBUTED,
    AssignmentRow,
    DemandRow,
    PlanRow,
    RentalRow,
    attribute_cost_to_models,
    breakdown,
    compare_baselines,
    model_costs,
    plan_gap,
)


def _plan(plan_id: str = "p", kind: str = "coral", status: str = "optimal", **kw) -> PlanRow:
    values = dict(
        parent_plan_id=None, mode="cost", created_at=None, objective=None, cost_usd_per_hr=None,
        lp_bound=None, gap=None, solve_s=None, served_fraction=1.0, snapshot_id=None,
        workload_id=None, stale=False, snapshot_age_s=None,
    ) | kw  # fmt: skip
    return PlanRow(plan_id=plan_id, kind=kind, status=status, **values)


def _rental(gpu: str, gpus: int, count: int, price: float, pricing: str = "on_demand") -> RentalRow:
    return RentalRow("aws", "r1", f"{gpu}-box", pricing, gpu, gpus, count, price)


def _assign(
    model: str, gpu: str, gpus: int, count: int, pricing: str = "on_demand"
) -> AssignmentRow:
    return AssignmentRow(
        f"{model}-{gpu}", model, "prefill", "aws", "r1", pricing, count, ((gpu, gpus),)
    )


def test_pool_cost_is_split_by_gpus_used_including_idle_slack():
    # one 8-GPU machine at $16/h; model a uses 3 GPUs, model b uses 1: 4 GPUs idle
    rentals = (_rental("H100", 8, 1, 16.0),)
    usd, gpus = attribute_cost_to_models(
        rentals, (_assign("a", "H100", 3, 1), _assign("b", "H100", 1, 1))
    )
    assert usd == {"a": 16.0 * 3 / 4, "b": 16.0 * 1 / 4}
    assert gpus == {"a": 3, "b": 1}


def test_unused_pool_is_unattributed_and_costs_still_sum():
    rentals = (_rental("H100", 8, 1, 16.0), _rental("L4", 1, 2, 1.0, pricing="spot"))
    usd, _ = attribute_cost_to_models(rentals, (_assign("a", "H100", 8, 1),))
    assert usd == {"a": 16.0, UNATTRIBUTED: 2.0}


def test_usd_per_million_tokens_uses_served_rates_and_token_sum():
    rentals = (_rental("H100", 8, 1, 36.0),)
    demand = (DemandRow("a", "r1", 1.0, 1.5, 900.0, 100.0),)
    (cost,) = model_costs(rentals, (_assign("a", "H100", 8, 1),), demand)
    tokens_per_hr = 2.5 * 1000.0 * 3600
    assert cost.tokens_per_hr == tokens_per_hr
    assert cost.usd_per_million_tokens == 36.0 / (tokens_per_hr / 1e6)


def test_unknown_token_counts_give_no_per_token_price():
    demand = (DemandRow("a", "r1", 1.0, 0.0, None, None),)
    (cost,) = model_costs((_rental("H100", 8, 1, 8.0),), (_assign("a", "H100", 8, 1),), demand)
    assert cost.usd_per_million_tokens is None


def test_breakdown_shares_sum_to_one():
    rentals = (_rental("H100", 8, 1, 30.0), _rental("L4", 1, 2, 5.0, pricing="spot"))
    lines = breakdown(rentals, "pricing")
    assert [(b.key, b.usd_per_hr) for b in lines] == [("on_demand", 30.0), ("spot", 10.0)]
    assert sum(b.share or 0 for b in lines) == 1.0


def test_baseline_ratio_and_infeasible_baseline():
    feasible = _plan("h", "homogeneous", cost_usd_per_hr=150.0)
    infeasible = _plan("m", "melange", status="infeasible", cost_usd_per_hr=999.0)
    from_rentals = _plan("pd", "homogeneous_pd", cost_usd_per_hr=1.0)
    rentals = {"pd": (_rental("H100", 8, 2, 60.0),)}
    got = {
        b.kind: b for b in compare_baselines(100.0, (feasible, infeasible, from_rentals), rentals)
    }
    assert (got["homogeneous"].ratio, got["homogeneous"].savings_fraction) == (1.5, 1 - 100 / 150)
    assert got["melange"].usd_per_hr is None and got["melange"].ratio is None
    assert got["homogeneous_pd"].usd_per_hr == 120.0  # rentals win over the recorded figure


def test_gap_recorded_or_derived():
    assert plan_gap(_plan(gap=0.02, objective=10.0, lp_bound=1.0)) == 0.02
    assert plan_gap(_plan(objective=10.0, lp_bound=9.0)) == (10.0 - 9.0) / 10.0
    assert plan_gap(_plan()) is None
