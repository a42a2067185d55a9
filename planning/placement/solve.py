"""Solving a placement problem: run the MILP, bound it by its LP relaxation, explain failures.

`solve(problem) -> Plan` never returns None and never asserts: an infeasible problem gives a plan
with status INFEASIBLE and an explanation naming what binds.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import pulp

from planning.placement import explain
from planning.placement.milp import (
    BuiltModel,
    SolveInfo,
    build,
    extract,
    fix_served,
    set_cost_objective,
    set_served_objective,
)
from planning.placement.plan import Plan, PlanKind, PlanStatus
from planning.placement.problem import Mode, PlacementProblem, SolverName


@dataclass(frozen=True, slots=True)
class RunOutcome:
    """One solver call: PuLP's status pair mapped to ours, and the objective value."""

    status: PlanStatus
    objective: float | None
    message: str | None = None


def solver_command(name: SolverName, time_limit_s: float, mip_gap: float = 0.0) -> pulp.LpSolver:
    """The PuLP solver object: CBC (bundled) or HiGHS through highspy, silent, time-limited,
    stopping at relative MIP gap `mip_gap`."""
    if name == SolverName.HIGHS:
        return pulp.HiGHS(msg=False, timeLimit=time_limit_s, gapRel=mip_gap)
    return pulp.PULP_CBC_CMD(msg=False, timeLimit=time_limit_s, gapRel=mip_gap)


def run(built: BuiltModel, name: SolverName, time_limit_s: float) -> RunOutcome:
    """Solve the built model as it stands. PuLP says "Optimal" for time-limited runs that found
    an incumbent; `sol_status` tells proven optimal (1) from feasible-not-proven (2)."""
    built.lp.solve(solver_command(name, max(time_limit_s, 0.1), built.problem.mip_gap))
    sol = built.lp.sol_status
    if built.lp.status == pulp.LpStatusInfeasible:
        return RunOutcome(PlanStatus.INFEASIBLE, None)
    if sol == pulp.LpSolutionOptimal:
        return RunOutcome(PlanStatus.OPTIMAL, pulp.value(built.lp.objective))
    if sol == pulp.LpSolutionIntegerFeasible:
        return RunOutcome(PlanStatus.FEASIBLE, pulp.value(built.lp.objective))
    if sol == pulp.LpSolutionNoSolutionFound:
        return RunOutcome(
            PlanStatus.INFEASIBLE,
            None,
            f"{name} found no feasible plan within {time_limit_s:.1f} s (not proven infeasible)",
        )
    return RunOutcome(PlanStatus.INFEASIBLE, None)


def solve(problem: PlacementProblem, kind: PlanKind = PlanKind.CORAL) -> Plan:
    """Solve `problem` in its mode; attach LP bound, gap and, when infeasible, an explanation."""
    started = time.perf_counter()
    built, outcome = solve_core(problem)
    solve_s = time.perf_counter() - started
    if outcome.status is PlanStatus.INFEASIBLE:
        reason = outcome.message or explain.explain_infeasible(problem)
        return explain.infeasible_plan(problem, kind, solve_s, reason)
    bound = lp_bound(problem)
    info = SolveInfo(
        kind=str(kind),
        status=str(outcome.status),
        solver=str(problem.solver),
        solve_s=solve_s,
        objective=outcome.objective,
        lp_bound=bound,
        gap=_gap(outcome.objective, bound),
        explanation=explain.unserved_note(problem),
    )
    return extract(built, info)


def solve_core(problem: PlacementProblem) -> tuple[BuiltModel, RunOutcome]:
    """Build and solve without bound or explanation: cost mode in one solve, goodput mode in
    two (max weighted served req/s, then min cost at that service level)."""
    deadline = time.perf_counter() + problem.time_limit_s
    built = build(problem)
    if problem.mode == Mode.COST and explain.precheck(problem):
        return built, RunOutcome(PlanStatus.INFEASIBLE, None)
    if problem.mode == Mode.GOODPUT:
        set_served_objective(built)
        first = run(built, problem.solver, deadline - time.perf_counter())
        if first.status is PlanStatus.INFEASIBLE or first.objective is None:
            return built, first
        fix_served(built, first.objective)
        set_cost_objective(built)
        second = run(built, problem.solver, deadline - time.perf_counter())
        if second.status is PlanStatus.INFEASIBLE:  # stage 2 timed out: keep stage 1's answer
            return built, first
        status = PlanStatus.OPTIMAL
        if PlanStatus.FEASIBLE in (first.status, second.status):
            status = PlanStatus.FEASIBLE
        return built, RunOutcome(status, first.objective)
    return built, run(built, problem.solver, problem.time_limit_s)


def lp_bound(problem: PlacementProblem) -> float | None:
    """The LP relaxation's optimum of the primary objective: a lower bound on $/h in cost mode,
    an upper bound on weighted served req/s in goodput mode. None if the LP did not solve."""
    relaxed = build(problem, relaxed=True)
    if problem.mode == Mode.GOODPUT:
        set_served_objective(relaxed)
    outcome = run(relaxed, problem.solver, problem.time_limit_s)
    return outcome.objective if outcome.status is PlanStatus.OPTIMAL else None


def _gap(objective: float | None, bound: float | None) -> float | None:
    """|objective - bound| / |objective| (0 when both are 0)."""
    if objective is None or bound is None:
        return None
    if abs(objective) < 1e-12:
        return 0.0 if abs(bound) < 1e-9 else None
    return abs(objective - bound) / abs(objective)
