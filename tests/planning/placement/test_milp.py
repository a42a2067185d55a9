"""Hand-sized placement problems whose optima are computed by hand, one per constraint."""

from __future__ import annotations

import pulp
import pytest

from planning.domain import Phase, Pricing
from planning.placement.milp import build, linear
from planning.placement.plan import PlanStatus
from planning.placement.problem import Churn, Mode, PlacementProblem, Slot, SolverName
from planning.placement.solve import solve
from tests.planning.placement.factories import demand, offer, template

P, D, C = Phase.PREFILL, Phase.DECODE, Phase.COLOCATED


def _pd_templates(model: str = "m") -> tuple:
    return (
        template("p-h", model, P, (("H100", 1),), 10_000),
        template("d-h", model, D, (("H100", 1),), 2_000),
    )


def test_colocated_optimum_by_hand() -> None:
    # 10 req/s, 1 req/s per L4 replica, headroom 0 -> 10 one-GPU L4 machines at $0.80 = $8.00.
    # The P/D alternative needs 1 P + 1 D H100 GPU = one 8-GPU machine at $80.
    problem = PlacementProblem(
        (*_pd_templates(), template("c-l4", "m", C, (("L4", 1),), 1.0)),
        (offer("H100", 8, 80.0, 2), offer("L4", 1, 0.8, 100)),
        (demand("m", 10),),
        headroom=0.0,
    )
    plan = solve(problem)
    assert plan.status == PlanStatus.OPTIMAL
    assert plan.cost_usd_per_hr == pytest.approx(8.0)
    assert [(a.template_id, a.count) for a in plan.assignments] == [("c-l4", 10)]
    assert plan.lp_bound == pytest.approx(8.0)
    assert plan.gap == pytest.approx(0.0, abs=1e-9)
    assert plan.demand_splits[0].coloc_rate_req_per_s == pytest.approx(10.0)


def test_pd_optimum_by_hand_with_headroom() -> None:
    # 10 req/s * 1000 in * 1.1 = 11,000 prefill tok/s -> 2 P (10k each);
    # 10 * 200 * 1.1 = 2,200 decode tok/s -> 2 D (2k each); 4 GPUs -> one 8-GPU machine, $80.
    problem = PlacementProblem(
        _pd_templates(), (offer("H100", 8, 80.0, 2),), (demand("m", 10),), headroom=0.1
    )
    plan = solve(problem)
    assert plan.cost_usd_per_hr == pytest.approx(80.0)
    assert {a.template_id: a.count for a in plan.assignments} == {"p-h": 2, "d-h": 2}
    assert plan.demand_splits[0].pd_rate_req_per_s == pytest.approx(10.0)
    # The LP relaxation runs 1.1 P + 1.1 D = 2.2 GPUs = 2.2/8 of a machine: $22, gap 72.5 %.
    assert plan.lp_bound == pytest.approx(22.0)
    # `gap` is to the best proven bound, not the LP relaxation: CBC proved optimality within the
    # default mip_gap 0.5 %, so the best bound is 80 less 0.5 %.
    assert plan.best_bound == pytest.approx(80 * (1 - 0.005))
    assert plan.gap == pytest.approx(0.005)


def test_highs_and_cbc_agree() -> None:
    base = PlacementProblem(
        (*_pd_templates(), template("c-l4", "m", C, (("L4", 1),), 1.0)),
        (offer("H100", 8, 80.0, 2), offer("L4", 4, 3.0, 2)),
        (demand("m", 30),),
    )
    cbc = solve(base)
    highs = solve(PlacementProblem(**{**_fields(base), "solver": SolverName.HIGHS}))
    assert highs.solver == "highs"
    assert cbc.cost_usd_per_hr == pytest.approx(highs.cost_usd_per_hr)


def _fields(p: PlacementProblem) -> dict:
    return {f: getattr(p, f) for f in p.__dataclass_fields__}


def test_c4_stage_never_spans_machines() -> None:
    # Two tp=4 replicas needed; one 4-GPU machine and four 1-GPU machines hold 8 GPUs in total,
    # but only one tp=4 stage fits -> infeasible. The 1-GPU machines alone host no stage at all.
    problem = PlacementProblem(
        (template("c4", "m", C, (("A", 4),), 1.0),),
        (offer("A", 4, 4.0, 1), offer("A", 1, 1.0, 4)),
        (demand("m", 2),),
        headroom=0.0,
    )
    plan = solve(problem)
    assert plan.status == PlanStatus.INFEASIBLE
    assert "A in aws/r1 (on_demand, 4-GPU machines)" in (plan.explanation or "")
    assert "C4_aws_r1_on_demand_A_4" in build(problem).lp.constraints


def test_mixed_pipeline_uses_both_gpu_types() -> None:
    # One template = 1 H100 stage + 1 L4 stage; 3 req/s at 1 req/s each -> 3 H100 + 3 L4 GPUs.
    problem = PlacementProblem(
        (template("mix", "m", C, (("H100", 1), ("L4", 1)), 1.0),),
        (offer("H100", 1, 3.0, 5), offer("L4", 1, 1.0, 5)),
        (demand("m", 3),),
        headroom=0.0,
    )
    plan = solve(problem)
    assert plan.cost_usd_per_hr == pytest.approx(3 * 3.0 + 3 * 1.0)
    assert plan.gpus_by_type() == {"H100": 3, "L4": 3}


def test_prefill_and_decode_must_share_a_region() -> None:
    # Prefill GPUs only in r1, decode GPUs only in r2: P/D cannot pair across regions.
    problem = PlacementProblem(
        (template("p", "m", P, (("X", 1),), 10_000), template("d", "m", D, (("Y", 1),), 2_000)),
        (offer("X", 1, 1.0, 10, region="r1"), offer("Y", 1, 1.0, 10, region="r2")),
        (demand("m", 1),),
    )
    plan = solve(problem)
    assert plan.status == PlanStatus.INFEASIBLE
    assert "model m" in (plan.explanation or "")


def test_spot_share_bound() -> None:
    # 4 req/s on 1-GPU colocated replicas: 4 GPUs. Spot is cheaper; at most 50 % on spot.
    offers = (
        offer("L4", 1, 1.0, 10),
        offer("L4", 1, 0.3, 10, pricing=Pricing.SPOT),
    )
    tpls = (template("c", "m", C, (("L4", 1),), 1.0),)
    free = solve(PlacementProblem(tpls, offers, (demand("m", 4),), headroom=0.0))
    assert free.cost_usd_per_hr == pytest.approx(4 * 0.3)
    bounded = solve(
        PlacementProblem(tpls, offers, (demand("m", 4),), headroom=0.0, max_spot_share=0.5)
    )
    assert bounded.cost_usd_per_hr == pytest.approx(2 * 0.3 + 2 * 1.0)


def test_budget_binds_with_explanation() -> None:
    problem = PlacementProblem(
        (template("c", "m", C, (("L4", 1),), 1.0),),
        (offer("L4", 1, 1.0, 10),),
        (demand("m", 4),),
        headroom=0.0,
        budget_usd_per_hr=3.0,
    )
    plan = solve(problem)
    assert plan.status == PlanStatus.INFEASIBLE
    assert plan.explanation is not None and plan.explanation.startswith("budget binds")
    assert "$4.00/h" in plan.explanation


def test_goodput_mode_prefers_priority_then_cost() -> None:
    # 3 GPUs for two models wanting 2 req/s each at 1 req/s per GPU: the priority-3 model is
    # served fully, the other gets the remaining GPU (50 %).
    tpls = (
        template("ca", "a", C, (("L4", 1),), 1.0),
        template("cb", "b", C, (("L4", 1),), 1.0),
    )
    problem = PlacementProblem(
        tpls,
        (offer("L4", 1, 1.0, 3),),
        (demand("a", 2, priority=1.0), demand("b", 2, priority=3.0)),
        headroom=0.0,
        mode=Mode.GOODPUT,
    )
    plan = solve(problem)
    served = {s.model: s.served_fraction for s in plan.services}
    assert served["b"] == pytest.approx(1.0)
    assert served["a"] == pytest.approx(0.5)
    assert plan.objective == pytest.approx(3.0 * 2 + 1.0 * 1)
    assert plan.cost_usd_per_hr == pytest.approx(3.0)


def test_goodput_second_stage_minimises_cost() -> None:
    # Enough cheap and dear GPUs: all demand is served, on the cheap ones.
    problem = PlacementProblem(
        (template("c1", "m", C, (("A", 1),), 1.0), template("c2", "m", C, (("B", 1),), 1.0)),
        (offer("A", 1, 5.0, 10), offer("B", 1, 1.0, 10)),
        (demand("m", 4),),
        headroom=0.0,
        mode=Mode.GOODPUT,
    )
    plan = solve(problem)
    assert plan.served_fraction == pytest.approx(1.0)
    assert plan.cost_usd_per_hr == pytest.approx(4.0)


def test_churn_penalty_keeps_previous_deployment() -> None:
    # Previously 4 replicas on A ($1.00); B is now cheaper ($0.90). Moving saves $0.40/h but costs
    # 8 changes; at $0.10/h per change staying wins, with no penalty moving wins.
    tpls = (template("ca", "m", C, (("A", 1),), 1.0), template("cb", "m", C, (("B", 1),), 1.0))
    offers = (offer("A", 1, 1.0, 10), offer("B", 1, 0.9, 10))
    prev = ((Slot("ca", "aws", "r1", Pricing.ON_DEMAND), 4),)
    base = {"templates": tpls, "offers": offers, "demands": (demand("m", 4),), "headroom": 0.0}
    moved = solve(PlacementProblem(**base, churn=Churn(prev)))
    assert moved.cost_usd_per_hr == pytest.approx(3.6)
    assert moved.churn_changes == 8
    stayed = solve(PlacementProblem(**base, churn=Churn(prev, penalty_usd_per_hr_per_change=0.1)))
    assert stayed.cost_usd_per_hr == pytest.approx(4.0)
    assert stayed.churn_changes == 0
    capped = solve(PlacementProblem(**base, churn=Churn(prev, max_changes=4)))
    assert capped.churn_changes <= 4
    assert capped.cost_usd_per_hr == pytest.approx(2 * 1.0 + 2 * 0.9)


def test_instances_no_request_can_reach_are_dropped() -> None:
    # Two regions with 8-GPU machines. Force a solution (by setting variable values) that
    # routes all demand to r1 but also places a prefill in r2, on GPUs of a machine rented
    # there: r2's prefill is unreachable and must not appear in the plan.
    from planning.placement.milp import SolveInfo, extract

    problem = PlacementProblem(
        _pd_templates(),
        (offer("H100", 8, 80.0, 2, region="r1"), offer("H100", 8, 80.0, 2, region="r2")),
        (demand("m", 1),),
        headroom=0.0,
    )
    built = build(problem)
    for (tid, loc, _), var in built.x.items():
        var.setInitialValue(1 if loc[1] == "r1" or tid == "p-h" else 0)
    for var in built.y.values():
        var.setInitialValue(1)
    for (_, loc), var in built.d.items():
        var.setInitialValue(1.0 if loc[1] == "r1" else 0.0)
    for var in built.e.values():
        var.setInitialValue(0.0)
    plan = extract(built, SolveInfo("coral", "optimal", "cbc", 0.0, 160.0, None, None))
    assert {(a.template_id, a.region) for a in plan.assignments} == {("p-h", "r1"), ("d-h", "r1")}


def test_linear_adds_up_repeated_variables() -> None:
    # a pipeline with two stages of one GPU type puts the same x twice into a C4 sum
    x, y = pulp.LpVariable("x"), pulp.LpVariable("y")
    expression = linear([(x, 2.0), (y, 1.5), (x, 4.0)])
    assert dict(expression) == {x: 6.0, y: 1.5}
    assert expression.constant == 0
