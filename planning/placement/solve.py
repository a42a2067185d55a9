"""Solving a placement problem: run the MILP, bound it, explain failures.

`solve(problem) -> Plan` never returns None and never asserts: an infeasible problem gives a plan
with status INFEASIBLE and an explanation naming what binds.

Bounds: `Plan.lp_bound` is the root LP relaxation; `Plan.best_bound` is the best proven bound
(the LP relaxation or the MIP solver's dual bound, whichever is tighter) and `Plan.gap` is the
gap to `best_bound`. Warm start: `solve(problem, start=plan)` hands a feasible plan (a baseline:
its templates are a subset of Coral's) to the solver as its first incumbent, and returns that plan
(relabelled, status FEASIBLE) if the time-limited MILP ends worse, so Coral is never worse than
the start it was given.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

import pulp

from planning.placement import explain
from planning.placement.milp import (
    BuiltModel,
    SolveInfo,
    XKey,
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
    dual_bound: float | None = None  # the MIP solver's proven bound on the objective, if known


class _HiGHS(pulp.HiGHS):
    """PuLP's highspy interface plus a warm start: `start` maps variable names to values that
    are handed to HiGHS (`setSolution`) as a first incumbent before it runs."""

    def __init__(self, start: dict[str, float] | None = None, **kwargs: object) -> None:
        super().__init__(**kwargs)
        self.start = start or {}

    def callSolver(self, lp: pulp.LpProblem) -> None:
        if self.start:
            import highspy

            values = [self.start.get(v.name, 0.0) for v in lp.variables()]
            solution = highspy.HighsSolution()
            solution.col_value = values
            solution.value_valid = True
            lp.solverModel.setSolution(solution)
        lp.solverModel.run()


def solver_command(
    name: SolverName,
    time_limit_s: float,
    mip_gap: float = 0.0,
    start: dict[str, float] | None = None,
) -> pulp.LpSolver:
    """The PuLP solver object: CBC (bundled) or HiGHS through highspy, silent, time-limited,
    stopping at relative MIP gap `mip_gap`, warm-started from `start` (variable name -> value)
    when given (CBC: `warmStart` with the values set as initial values by `run`)."""
    if name == SolverName.HIGHS:
        return _HiGHS(start=start, msg=False, timeLimit=time_limit_s, gapRel=mip_gap)
    return pulp.PULP_CBC_CMD(
        msg=False, timeLimit=time_limit_s, gapRel=mip_gap, warmStart=bool(start)
    )


def run(
    built: BuiltModel,
    name: SolverName,
    time_limit_s: float,
    start: dict[str, float] | None = None,
) -> RunOutcome:
    """Solve the built model as it stands. PuLP says "Optimal" for time-limited runs that found
    an incumbent; `sol_status` tells proven optimal (1) from feasible-not-proven (2)."""
    if start and name == SolverName.CBC:
        for var in built.lp.variables():
            var.setInitialValue(start.get(var.name, 0.0))
    built.lp.solve(solver_command(name, max(time_limit_s, 0.1), built.problem.mip_gap, start=start))
    sol = built.lp.sol_status
    if built.lp.status == pulp.LpStatusInfeasible:
        return RunOutcome(PlanStatus.INFEASIBLE, None)
    objective = pulp.value(built.lp.objective)
    if sol == pulp.LpSolutionOptimal:
        return RunOutcome(PlanStatus.OPTIMAL, objective, dual_bound=_dual_bound(built, name))
    if sol == pulp.LpSolutionIntegerFeasible:
        return RunOutcome(PlanStatus.FEASIBLE, objective, dual_bound=_dual_bound(built, name))
    if sol == pulp.LpSolutionNoSolutionFound:
        return RunOutcome(
            PlanStatus.INFEASIBLE,
            None,
            f"{name} found no feasible plan within {time_limit_s:.1f} s (not proven infeasible)",
        )
    return RunOutcome(PlanStatus.INFEASIBLE, None)


def _dual_bound(built: BuiltModel, name: SolverName) -> float | None:
    """The MIP solver's proven bound on the objective after a solve, in the model's sense.
    HiGHS: `mip_dual_bound` (PuLP hands HiGHS -objective when maximising). CBC through PuLP
    reports no bound; when it proves optimality within `mip_gap` the bound is implied by it."""
    objective = pulp.value(built.lp.objective)
    maximise = built.lp.sense == pulp.LpMaximize
    if name == SolverName.HIGHS:
        model = getattr(built.lp, "solverModel", None)
        if model is None:
            return None
        bound = float(model.getInfo().mip_dual_bound)
        if bound != bound or abs(bound) == float("inf"):  # NaN or infinite: no bound
            return None
        return -bound if maximise else bound
    if objective is None or built.lp.sol_status != pulp.LpSolutionOptimal:
        return None
    slack = built.problem.mip_gap * abs(objective)
    return objective + slack if maximise else objective - slack


def solve(
    problem: PlacementProblem, kind: PlanKind = PlanKind.CORAL, *, start: Plan | None = None
) -> Plan:
    """Solve `problem` in its mode; attach LP bound, best bound, gap and, when infeasible, an
    explanation. `start`: a feasible plan of the same problem (e.g. the best baseline) used as
    the MILP's first incumbent; the result is never worse than it (see module docstring)."""
    started = time.perf_counter()
    built, outcome = solve_core(problem, start=start)
    solve_s = time.perf_counter() - started
    if outcome.status is PlanStatus.INFEASIBLE:
        if start is not None and start.feasible:
            return _fallback(start, kind, solve_s, None, "the MILP found no plan in time")
        reason = outcome.message or explain.explain_infeasible(problem)
        return explain.infeasible_plan(problem, kind, solve_s, reason)
    bound = lp_bound(problem, keep=_template_ids(start))
    best = _best_bound(problem.mode, bound, outcome.dual_bound)
    info = SolveInfo(
        kind=str(kind),
        status=str(outcome.status),
        solver=str(problem.solver),
        solve_s=solve_s,
        objective=outcome.objective,
        lp_bound=bound,
        gap=_gap(outcome.objective, best),
        explanation=explain.unserved_note(problem),
    )
    plan = replace(extract(built, info), best_bound=best)
    if start is not None and start.feasible and _worse(plan, start, problem.mode):
        return _fallback(start, kind, solve_s, best, "the time-limited MILP ended worse")
    return plan


def _template_ids(plan: Plan | None) -> frozenset[str]:
    return frozenset(a.template_id for a in plan.assignments) if plan is not None else frozenset()


def _worse(plan: Plan, start: Plan, mode: Mode) -> bool:
    """Whether `plan` is worse than `start` on the primary objective, then on cost."""
    cost, start_cost = plan.cost_usd_per_hr or 0.0, start.cost_usd_per_hr or 0.0
    if mode == Mode.GOODPUT:
        served, start_served = plan.served_req_per_s, start.served_req_per_s
        if abs(served - start_served) > 1e-6 * max(1.0, start_served):
            return served < start_served
    return cost > start_cost + 1e-6


def _fallback(start: Plan, kind: PlanKind, solve_s: float, bound: float | None, why: str) -> Plan:
    """The warm-start plan, relabelled as `kind` and not proven optimal."""
    note = f"warm-start plan ({start.kind}) kept: {why}"
    return replace(
        start,
        kind=kind,
        status=PlanStatus.FEASIBLE,
        solve_s=solve_s,
        best_bound=bound if bound is not None else start.best_bound,
        gap=_gap(start.objective, bound) if bound is not None else start.gap,
        explanation=f"{start.explanation}; {note}" if start.explanation else note,
    )


def _best_bound(mode: Mode, lp: float | None, dual: float | None) -> float | None:
    """The tighter of the LP relaxation and the MIP dual bound (max for cost, min for goodput)."""
    known = [b for b in (lp, dual) if b is not None]
    if not known:
        return None
    return min(known) if mode == Mode.GOODPUT else max(known)


def warm_values(built: BuiltModel, plan: Plan) -> dict[str, float]:
    """Variable name -> value that reproduces `plan` in `built` (x, y, d, e, u, z); variables
    `plan` does not mention are 0. Plans whose slots `built` lacks give a partial start."""
    values: dict[str, float] = {}
    for a in plan.assignments:
        var = built.x.get((a.template_id, (a.cloud, a.region), a.pricing))
        if var is not None:
            values[var.name] = values.get(var.name, 0.0) + a.count
    offers = built.problem.offers
    for r in plan.rentals:
        for i, var in built.y.items():
            o = offers[i]
            if (o.cloud, o.region, o.instance_type, o.pricing) == (
                r.cloud,
                r.region,
                r.instance_type,
                r.pricing,
            ):
                values[var.name] = float(r.count)
                break
    for s in plan.demand_splits:
        loc = next((k[1] for k in built.d if k[0] == s.model and k[1][1] == s.region), None)
        loc = loc or next((k[1] for k in built.e if k[0] == s.model and k[1][1] == s.region), None)
        if loc is None:
            continue
        if (dv := built.d.get((s.model, loc))) is not None:
            values[dv.name] = s.pd_rate_req_per_s
        if (ev := built.e.get((s.model, loc))) is not None:
            values[ev.name] = s.coloc_rate_req_per_s
    for svc in plan.services:
        if (uv := built.u.get(svc.model)) is not None:
            values[uv.name] = svc.served_fraction
    previous: dict[XKey, int] = {}
    if built.problem.churn is not None:
        for slot, count in built.problem.churn.previous:
            key = (slot.template_id, (slot.cloud, slot.region), slot.pricing)
            previous[key] = previous.get(key, 0) + count
    for key, zv in built.z.items():
        xv = built.x[key]
        values[zv.name] = abs(values.get(xv.name, 0.0) - previous.get(key, 0))
    return values


def solve_core(
    problem: PlacementProblem, start: Plan | None = None
) -> tuple[BuiltModel, RunOutcome]:
    """Build and solve without bound or explanation: cost mode in one solve, goodput mode in
    two (max weighted served req/s, then min cost at that service level). `start`'s templates
    are kept through any shortlist and its values seed the solver."""
    deadline = time.perf_counter() + problem.time_limit_s
    built = build(problem, keep=_template_ids(start))
    if problem.mode == Mode.COST and explain.precheck(problem):
        return built, RunOutcome(PlanStatus.INFEASIBLE, None)
    values = warm_values(built, start) if start is not None and start.feasible else None
    if problem.mode == Mode.GOODPUT:
        set_served_objective(built)
        first = run(built, problem.solver, deadline - time.perf_counter(), values)
        if first.status is PlanStatus.INFEASIBLE or first.objective is None:
            return built, first
        fix_served(built, first.objective)
        set_cost_objective(built)
        second = run(built, problem.solver, deadline - time.perf_counter(), values)
        if second.status is PlanStatus.INFEASIBLE:  # stage 2 timed out: keep stage 1's answer
            return built, first
        status = PlanStatus.OPTIMAL
        if PlanStatus.FEASIBLE in (first.status, second.status):
            status = PlanStatus.FEASIBLE
        return built, RunOutcome(status, first.objective, dual_bound=first.dual_bound)
    return built, run(built, problem.solver, problem.time_limit_s, values)


def lp_bound(problem: PlacementProblem, keep: frozenset[str] = frozenset()) -> float | None:
    """The LP relaxation's optimum of the primary objective: a lower bound on $/h in cost mode,
    an upper bound on weighted served req/s in goodput mode. None if the LP did not solve.
    `keep`: template ids kept through the shortlist (as in the MILP)."""
    relaxed = build(problem, relaxed=True, keep=keep)
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
