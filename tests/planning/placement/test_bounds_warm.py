"""Best-bound gap and warm start: the gap uses the best proven bound; a warm start from a
baseline is never beaten by the MILP's own time-limited answer in the wrong direction."""

from __future__ import annotations

from dataclasses import replace

import pytest

from planning.domain import Phase
from planning.placement.baselines import best_start, solve_baseline
from planning.placement.plan import PlanKind, PlanStatus
from planning.placement.problem import PlacementProblem, SolverName
from planning.placement.solve import solve
from tests.planning.placement.factories import demand, offer, template

P, D, C = Phase.PREFILL, Phase.DECODE, Phase.COLOCATED


def _problem(solver: SolverName) -> PlacementProblem:
    # P/D needs 4 H100 GPUs = one 8-GPU machine at $80; colocated needs 10 L4 boxes at $1 = $10.
    return PlacementProblem(
        (
            template("p-h", "m", P, (("H100", 1),), 10_000),
            template("d-h", "m", D, (("H100", 1),), 2_000),
            template("c-l4", "m", C, (("L4", 1),), 1.1),
        ),
        (offer("H100", 8, 80.0, 2), offer("L4", 1, 1.0, 100)),
        (demand("m", 10),),
        headroom=0.1,
        solver=solver,
        mip_gap=0.0,
    )


def test_highs_gap_is_to_the_mip_dual_bound() -> None:
    plan = solve(_problem(SolverName.HIGHS))
    assert plan.status is PlanStatus.OPTIMAL
    assert plan.cost_usd_per_hr == pytest.approx(10.0)
    assert plan.lp_bound is not None and plan.best_bound is not None
    assert plan.best_bound >= plan.lp_bound - 1e-9
    assert plan.best_bound == pytest.approx(10.0)
    assert plan.gap == pytest.approx(abs(plan.objective - plan.best_bound) / plan.objective)


@pytest.mark.parametrize("solver", [SolverName.CBC, SolverName.HIGHS])
def test_warm_start_from_baseline_is_never_worse(solver: SolverName) -> None:
    problem = _problem(solver)
    base = solve_baseline(PlanKind.MELANGE, problem)
    # a tiny time limit: whatever the MILP reaches, the answer is no worse than the start
    plan = solve(replace(problem, time_limit_s=0.01), start=base)
    assert plan.feasible and plan.kind is PlanKind.CORAL
    assert (plan.cost_usd_per_hr or 0) <= (base.cost_usd_per_hr or 0) + 1e-6
    full = solve(problem, start=base)
    assert full.cost_usd_per_hr == pytest.approx(solve(problem).cost_usd_per_hr)


def test_best_start_prefers_most_served_then_cheapest() -> None:
    problem = _problem(SolverName.HIGHS)
    base = solve_baseline(PlanKind.MELANGE, problem)
    cheaper = replace(base, kind=PlanKind.HOMOGENEOUS, cost_usd_per_hr=base.cost_usd_per_hr - 1)
    serves_less = replace(cheaper, kind=PlanKind.HOMOGENEOUS_PD, services=())
    infeasible = replace(cheaper, status=PlanStatus.INFEASIBLE, cost_usd_per_hr=0.0)
    assert best_start([base, serves_less, infeasible, cheaper]) is cheaper
    assert best_start([base, serves_less]) is base
    assert best_start([infeasible]) is None
