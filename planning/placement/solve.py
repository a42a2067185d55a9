"""Solving a placement problem: run the MILP, bound it, explain failures.

`solve(problem) -> Plan` never returns None and never asserts: an infeasible problem gives a plan
with status INFEASIBLE and an explanation naming what binds.

Pipeline (`solve_core`): interchangeable locations are merged (`aggregate`: an exact relaxation
that removes the MILP's symmetry between identical regions); a restricted MILP over candidate
templates gives a first plan (`candidates`); the full MILP starts from it for the time left
less `SPLIT_TIME_SHARE` (at least `SPLIT_S`); the merged plan is split back over the real
locations in that share (`_split`: its pieces placed by small MILPs, P/D pieces whole first,
then every instance from there, then polished). In cost mode the restricted plan is split too,
before the full MILP runs, and the cheaper split kept (`_solve_merged`). The whole pipeline
keeps to `time_limit_s` except where a split must be searched from scratch (`SPLIT_MIN_S`).

Bounds: `Plan.lp_bound` is the root LP relaxation; `Plan.best_bound` is the best proven bound
(the LP relaxation or the MIP solver's dual bound, whichever is tighter) and `Plan.gap` is the
gap to `best_bound`. Warm start: `solve(problem, start=plan)` hands a feasible plan (a baseline:
its templates are a subset of Coral's) to the solver as its first incumbent, and returns that plan
(relabelled, status FEASIBLE) if the time-limited MILP ends worse, so Coral is never worse than
the start it was given.
"""

from __future__ import annotations

import itertools
import math
import time
from collections import defaultdict
from dataclasses import dataclass, replace

import numpy as np
import pulp

from planning.domain import Pricing
from planning.placement import aggregate, explain
from planning.placement.candidates import candidate_ids
from planning.placement.milp import (
    BuiltModel,
    Location,
    SolveInfo,
    XKey,
    build,
    extract,
    fix_served,
    read_services,
    set_cost_objective,
    set_served_objective,
)
from planning.placement.plan import ModelService, Plan, PlanKind, PlanStatus
from planning.placement.problem import Mode, PlacementProblem, SolverName

RESTRICTED_TIME_SHARE = 0.5  # of the time left, at most, for the restricted (candidates) MILP
START_MIP_GAP = 0.02  # the restricted MILP is only a start: it stops within this of its bound
FULL_MIN_S = 1.0  # the full MILP runs after the restricted one only with this much time left
SPLIT_TIME_SHARE = 0.2  # of the time limit, kept for splitting the last merged plan back
# Time for one split, at least: scenario (d)'s restricted plan split, every instance placed and
# polished, in ~1.1 s (with ~0.7 s it stayed 2.5 % dearer)
SPLIT_S = 1.2
SPLIT_MIN_S = 1.5  # a split searched from scratch gets at least this, even past the limit
PIECES_MIN_S = 0.5  # placing a merged plan's pieces gets at least this, even past the limit
INSTANCES_MIN_S = 0.3  # placing every instance apart is tried only with this much time left
FIX_S = 0.05  # ... and stops this long before the deadline: the fixed split is solved after it
NEIGHBOURHOOD_S = 1.0  # a split's polish: at most this per neighbourhood (see `_improve`)


@dataclass(frozen=True, slots=True)
class RunOutcome:
    """One solver call: PuLP's status pair mapped to ours, and the objective value."""

    status: PlanStatus
    objective: float | None
    message: str | None = None
    dual_bound: float | None = None  # the MIP solver's proven bound on the objective, if known


class _HiGHS(pulp.HiGHS):
    """PuLP's highspy interface plus a warm start: `start` maps variable names to values that
    are handed to HiGHS (`setSolution`) as a first incumbent before it runs. The model is handed
    over in one `addCols` and one `addRows` call instead of PuLP's call per column and per row
    (scenario (d)'s 11k-column LP: PuLP's hand-over took longer than HiGHS's solve)."""

    def __init__(self, start: dict[str, float] | None = None, **kwargs: object) -> None:
        super().__init__(**kwargs)
        self.start = start or {}
        self.columns: list[pulp.LpVariable] = []

    def buildSolverModel(self, lp: pulp.LpProblem) -> None:
        import highspy

        self.columns = lp.variables()
        sign = -1.0 if lp.sense == pulp.LpMaximize else 1.0
        for i, var in enumerate(self.columns):
            var.index = i
        model = lp.solverModel
        model.addCols(
            len(self.columns),
            np.array([sign * lp.objective.get(v, 0.0) for v in self.columns], dtype=np.float64),
            _bounds([v.lowBound for v in self.columns], -highspy.kHighsInf),
            _bounds([v.upBound for v in self.columns], highspy.kHighsInf),
            0,
            np.zeros(0, dtype=np.int32),
            np.zeros(0, dtype=np.int32),
            np.zeros(0, dtype=np.float64),
        )
        integers = [v.index for v in self.columns if v.cat == pulp.LpInteger]
        if self.mip and integers:
            model.changeColsIntegrality(
                len(integers),
                np.array(integers, dtype=np.int32),
                np.full(len(integers), highspy.HighsVarType.kInteger, dtype=np.uint8),
            )
        self._add_rows(lp, highspy.kHighsInf)

    def _add_rows(self, lp: pulp.LpProblem, inf: float) -> None:
        starts: list[int] = []
        indices: list[int] = []
        values: list[float] = []
        for i, constraint in enumerate(lp._constraints.values()):
            constraint.index = i
            starts.append(len(indices))
            for var, coefficient in constraint.items():
                if coefficient != 0:
                    indices.append(var.index)
                    values.append(coefficient)
        rows = list(lp._constraints.values())
        lp.solverModel.addRows(
            len(rows),
            _bounds([c.getLb() for c in rows], -inf),
            _bounds([c.getUb() for c in rows], inf),
            len(indices),
            np.array(starts, dtype=np.int32),
            np.array(indices, dtype=np.int32),
            np.array(values, dtype=np.float64),
        )

    def callSolver(self, lp: pulp.LpProblem) -> None:
        if self.start:
            import highspy

            values = [self.start.get(v.name, 0.0) for v in self.columns]
            solution = highspy.HighsSolution()
            solution.col_value = values
            solution.value_valid = True
            lp.solverModel.setSolution(solution)
        lp.solverModel.run()


def _bounds(values: list[float | None], missing: float) -> np.ndarray:
    return np.array([missing if v is None else v for v in values], dtype=np.float64)


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


@dataclass(slots=True)
class Solved:
    """What `solve_core` hands back: the model the plan is read from, the outcome (its bound is
    valid for the whole problem), the LP relaxation's optimum and, when locations were merged,
    the served fractions of the merged solve."""

    built: BuiltModel
    outcome: RunOutcome
    lp_bound: float | None
    services: tuple[ModelService, ...] | None = None


def solve(
    problem: PlacementProblem, kind: PlanKind = PlanKind.CORAL, *, start: Plan | None = None
) -> Plan:
    """Solve `problem` in its mode; attach LP bound, best bound, gap and, when infeasible, an
    explanation. `start`: a feasible plan of the same problem (e.g. the best baseline) used as
    the MILP's first incumbent; the result is never worse than it (see module docstring)."""
    started = time.perf_counter()
    solved = solve_core(problem, start=start)
    solve_s = time.perf_counter() - started
    outcome = solved.outcome
    if outcome.status is PlanStatus.INFEASIBLE:
        if start is not None and start.feasible:
            return _fallback(start, kind, solve_s, None, "the MILP found no plan in time")
        reason = outcome.message or explain.explain_infeasible(problem)
        return explain.infeasible_plan(problem, kind, solve_s, reason)
    best = _best_bound(problem.mode, solved.lp_bound, outcome.dual_bound)
    info = SolveInfo(
        kind=str(kind),
        status=str(outcome.status),
        solver=str(problem.solver),
        solve_s=solve_s,
        objective=outcome.objective,
        lp_bound=solved.lp_bound,
        gap=_gap(outcome.objective, best),
        explanation=explain.unserved_note(problem),
    )
    plan = replace(extract(solved.built, info), mode=str(problem.mode), best_bound=best)
    if solved.services is not None:
        plan = replace(plan, services=solved.services)
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


def solve_core(problem: PlacementProblem, start: Plan | None = None, merge: bool = True) -> Solved:
    """Build and solve (see the module docstring for the pipeline); no explanation. Cost mode
    is one solve, goodput mode two (max weighted served req/s, then min cost at that level).
    `start`'s values seed the solver. `merge=False` keeps every location apart."""
    deadline = time.perf_counter() + problem.time_limit_s
    if problem.mode == Mode.COST and explain.precheck(problem):
        return Solved(build(problem), RunOutcome(PlanStatus.INFEASIBLE, None), None)
    groups = aggregate.location_groups(problem.offers)
    if merge and groups.merges and problem.churn is None:
        return _solve_merged(problem, groups, start, deadline)
    return _solve_full(problem, start, deadline)


def _solve_full(
    problem: PlacementProblem,
    start: Plan | None,
    deadline: float,
    full_deadline: float | None = None,
) -> Solved:
    """LP relaxation, then (with `start_candidates`) the restricted MILP, then the full MILP
    from the best start until `full_deadline` (default `deadline`); returns whichever plan is
    better, with the full MILP's bound. The full MILP is skipped when the restricted plan is
    already within `mip_gap` of the LP bound, or when it would get less than `FULL_MIN_S`."""
    full_deadline = deadline if full_deadline is None else min(full_deadline, deadline)
    first = _first_plan(problem, start, deadline, full_deadline)
    done = _final_first(problem, first, full_deadline)
    return done or _full(problem, start, first, full_deadline)


@dataclass(frozen=True, slots=True)
class FirstPlan:
    """The LP relaxation's optimum (None: not solved) and the restricted MILP's model and
    outcome (None: no plan or not run)."""

    lp_bound: float | None
    restricted: tuple[BuiltModel, RunOutcome] | None


def _first_plan(
    problem: PlacementProblem, start: Plan | None, deadline: float, full_deadline: float
) -> FirstPlan:
    """The LP relaxation, then (with `start_candidates`) the restricted MILP."""
    relaxed = build(problem, relaxed=True)
    if problem.mode == Mode.GOODPUT:
        set_served_objective(relaxed)
    lp = run(relaxed, problem.solver, _left(deadline))
    bound = lp.objective if lp.status is PlanStatus.OPTIMAL else None
    restricted = None
    if problem.start_candidates is not None and bound is not None:
        restricted = _solve_candidates(problem, relaxed, start, deadline, full_deadline)
    return FirstPlan(bound, restricted)


def _final_first(
    problem: PlacementProblem, first: FirstPlan, full_deadline: float
) -> Solved | None:
    """The restricted plan as the answer, if the full MILP cannot improve it by more than
    `mip_gap` (LP bound) or would get less than `FULL_MIN_S` before `full_deadline`; else None."""
    if first.restricted is None:
        return None
    small, outcome = first.restricted
    if _proven_by_lp(problem, outcome.objective, first.lp_bound):
        return Solved(small, replace(outcome, status=PlanStatus.OPTIMAL), first.lp_bound)
    if full_deadline - time.perf_counter() < FULL_MIN_S:
        return Solved(small, replace(outcome, status=PlanStatus.FEASIBLE), first.lp_bound)
    return None


def _full(
    problem: PlacementProblem, start: Plan | None, first: FirstPlan, deadline: float
) -> Solved:
    """The full MILP until `deadline`, started from the restricted plan (else from `start`);
    the better of the two, with the full MILP's bound."""
    built = build(problem)
    values = None
    if first.restricted is not None:
        values = transfer_values(first.restricted[0], built)
    elif start is not None and start.feasible:
        values = warm_values(built, start)
    outcome = _run_mode(built, deadline, values)
    if first.restricted is not None and _better(first.restricted[1], outcome, problem.mode):
        small, restricted = first.restricted
        feasible = replace(restricted, status=PlanStatus.FEASIBLE, dual_bound=outcome.dual_bound)
        return Solved(small, feasible, first.lp_bound)
    return Solved(built, outcome, first.lp_bound)


def _solve_candidates(
    problem: PlacementProblem,
    relaxed: BuiltModel,
    start: Plan | None,
    deadline: float,
    full_deadline: float,
) -> tuple[BuiltModel, RunOutcome] | None:
    """The MILP over candidate templates (see `candidates`) with `RESTRICTED_TIME_SHARE` of the
    time left to `full_deadline`, or until `deadline` when the full MILP would not get
    `FULL_MIN_S` after it anyway: the model it was solved in and its outcome, with no bound (a
    bound over a subset of templates bounds nothing), or None when it found no plan."""
    ids = candidate_ids(problem, relaxed, problem.start_candidates or 0) | _template_ids(start)
    kept = tuple(t for t in problem.templates if t.template_id in ids)
    small = build(replace(problem, templates=kept, mip_gap=max(problem.mip_gap, START_MIP_GAP)))
    values = warm_values(small, start) if start is not None and start.feasible else None
    now = time.perf_counter()
    full_left = full_deadline - now
    ends = deadline
    if full_left * (1 - RESTRICTED_TIME_SHARE) >= FULL_MIN_S:
        ends = now + full_left * RESTRICTED_TIME_SHARE
    outcome = _run_mode(small, ends, values)
    if outcome.status is PlanStatus.INFEASIBLE:
        return None
    return small, replace(outcome, dual_bound=None)


def _proven_by_lp(problem: PlacementProblem, objective: float | None, bound: float | None) -> bool:
    """Cost mode: the objective is within `mip_gap` of the LP bound, so no search can improve
    it by more than that (goodput's second stage is not covered by the LP bound)."""
    if problem.mode != Mode.COST or objective is None or bound is None:
        return False
    return objective - bound <= problem.mip_gap * abs(objective) + 1e-9


def _solve_merged(
    problem: PlacementProblem, groups: aggregate.LocationGroups, start: Plan | None, deadline: float
) -> Solved:
    """Solve with interchangeable locations merged and split the plan back over them (`_split`),
    leaving `SPLIT_TIME_SHARE` of the limit, and at least `SPLIT_S`, for the last split.

    Cost mode, when the full MILP runs after the restricted one: the restricted MILP's plan is
    split first (for at most `SPLIT_S`), the full MILP's plan after it only if it is cheaper
    merged than that split (a split never costs less than its merged plan), and the cheaper
    split is kept: the cheapest merged plan need not split best (it may pack machines that,
    split, are half used; seen on scenario (d)), and a split of the restricted plan is at hand
    however little time the full MILP leaves; if that split is kept, its polish goes on for the
    time left. If no split is found, the problem is solved with locations apart, with a fresh time
    limit."""
    share = problem.time_limit_s * SPLIT_TIME_SHARE
    full_deadline = deadline - max(share, SPLIT_S)
    early = problem.mode == Mode.COST  # goodput: plans serve different demand, split the last
    merged_problem = aggregate.aggregate(problem, groups)
    merged_start = aggregate.merge_plan(start, groups)
    gate = full_deadline - SPLIT_S if early else full_deadline
    first = _first_plan(merged_problem, merged_start, deadline - share, gate)
    merged = _final_first(merged_problem, first, gate)
    # the polish of a split may also use the restricted MILP's candidates (a merged plan can
    # rely on pooled scarce machines that, split, no longer fit with its own templates)
    extra = frozenset(first.restricted[0].templates) if first.restricted else frozenset()
    splits: list[tuple[dict[XKey, int], BuiltModel, RunOutcome]] = []
    if merged is None:
        if early and first.restricted is not None:
            ends = min(time.perf_counter() + SPLIT_S, deadline)
            splits.append(_split_merged(problem, groups, first.restricted[0], ends, False, extra))
        merged = _full(merged_problem, merged_start, first, full_deadline)
    cut_short = splits[0][1] if splits else None  # polished within `SPLIT_S` only
    if merged.outcome.status is PlanStatus.INFEASIBLE:
        return merged
    if _worth_splitting(merged.built, splits):
        found = any(o.objective is not None for _c, _b, o in splits)
        splits.append(_split_merged(problem, groups, merged.built, deadline, not found, extra))
    _counts, split, outcome = min(splits, key=lambda s: _cost_or_inf(s[2]))
    if outcome.status is PlanStatus.INFEASIBLE:
        return _solve_full(problem, start, time.perf_counter() + problem.time_limit_s)
    if split is cut_short:
        outcome = _improve(split, outcome, deadline, problem.mip_gap)  # with the time left
    cost = outcome.objective or 0.0
    merged_cost = pulp.value(merged.built.cost) or 0.0
    same = merged.outcome.status is PlanStatus.OPTIMAL and cost <= merged_cost + 1e-6
    final = RunOutcome(
        PlanStatus.OPTIMAL if same else PlanStatus.FEASIBLE,
        merged.outcome.objective if problem.mode == Mode.GOODPUT else cost,
        dual_bound=merged.outcome.dual_bound,
    )
    return Solved(split, final, merged.lp_bound, read_services(merged.built))


def _split_merged(
    problem: PlacementProblem,
    groups: aggregate.LocationGroups,
    merged: BuiltModel,
    deadline: float,
    fallback: bool,
    extra: frozenset[str],
) -> tuple[dict[XKey, int], BuiltModel, RunOutcome]:
    """`_split` of the plan solved in `merged`, with the plan's merged counts."""
    served = {s.model: s.served_fraction for s in read_services(merged)}
    counts = aggregate.merged_counts(merged)
    split, outcome = _split(
        problem, groups, counts, served, deadline, fallback=fallback, extra=extra
    )
    return counts, split, outcome


def _worth_splitting(
    merged: BuiltModel, splits: list[tuple[dict[XKey, int], BuiltModel, RunOutcome]]
) -> bool:
    """Whether the plan solved in `merged` may split cheaper than every split in `splits`: it
    is not one of theirs and its merged cost is below theirs (a split never costs less than its
    merged plan)."""
    if any(counts == aggregate.merged_counts(merged) for counts, _b, _o in splits):
        return False
    found = [o.objective for _c, _b, o in splits if o.objective is not None]
    return not found or (pulp.value(merged.cost) or 0.0) < min(found) - 1e-6


def _cost_or_inf(outcome: RunOutcome) -> float:
    return outcome.objective if outcome.objective is not None else math.inf


def _split(
    problem: PlacementProblem,
    groups: aggregate.LocationGroups,
    counts: dict[XKey, int],
    served: dict[str, float],
    deadline: float,
    *,
    fallback: bool = True,
    extra: frozenset[str] = frozenset(),
) -> tuple[BuiltModel, RunOutcome]:
    """The merged plan's instances over the real locations (`aggregate.disaggregation`) with
    the instances fixed where `_place` put them: only machines and routing are left to solve;
    then polished (`_improve`), where the `extra` templates may be used too (with `SPLIT_S` or
    more left: they make the model bigger, which costs time however it ends). Without a
    placement, the split is searched from scratch (given at least `SPLIT_MIN_S`, past the
    deadline if need be: a merged plan that is not split is no plan), then without the merged
    totals (not with `fallback=False`: then INFEASIBLE)."""
    if deadline - time.perf_counter() < SPLIT_S:  # too little time to polish with them
        extra = frozenset()
    split = aggregate.disaggregation(problem, groups, counts, served, extra)
    placed = _place(problem, groups, counts, served, deadline)
    if placed is not None:
        aggregate.fix_instances(split, placed)
        fitted = run(split, problem.solver, max(_left(deadline), PIECES_MIN_S))
        aggregate.drop_fixed(split)
        if fitted.status is not PlanStatus.INFEASIBLE:
            return split, _improve(split, fitted, deadline, problem.mip_gap)
    if not fallback:
        return split, RunOutcome(PlanStatus.INFEASIBLE, None)
    limit = max(_left(deadline), SPLIT_MIN_S)
    outcome = run(split, problem.solver, limit)
    if outcome.status is PlanStatus.INFEASIBLE:
        aggregate.drop_totals(split)
        outcome = run(split, problem.solver, limit)
    if outcome.status is PlanStatus.INFEASIBLE:
        return split, outcome
    return split, _improve(split, outcome, deadline, problem.mip_gap)


def _place(
    problem: PlacementProblem,
    groups: aggregate.LocationGroups,
    counts: dict[XKey, int],
    served: dict[str, float],
    deadline: float,
) -> dict[XKey, int] | None:
    """Instance counts per real location (None: none found): `aggregate.piece_model` with P/D
    pieces whole (fast, stops within `SPLIT_MIP_GAP`; at least `PIECES_MIN_S`), then, with
    `INSTANCES_MIN_S` or more left, with every instance a piece, started from the first
    placement, for the time left less `FIX_S`; the cheaper placement."""
    whole = aggregate.piece_model(problem, groups, counts, served, whole_pd=True)
    limit = max(_left(deadline), PIECES_MIN_S)
    whole.lp.solve(solver_command(problem.solver, limit, aggregate.SPLIT_MIP_GAP))
    found = _placed(whole)
    if deadline - time.perf_counter() < INSTANCES_MIN_S:
        return found[1] if found else None
    apart = aggregate.piece_model(problem, groups, counts, served, whole_pd=False)
    start = _piece_start(apart, found[1], problem.solver) if found else None
    limit = _left(deadline - FIX_S)
    apart.lp.solve(solver_command(problem.solver, limit, problem.mip_gap, start=start))
    cheapest = min((f for f in (found, _placed(apart)) if f), key=lambda f: f[0], default=None)
    return cheapest[1] if cheapest else None


def _placed(model: aggregate.PieceModel) -> tuple[float, dict[XKey, int]] | None:
    """The machine cost and placement of a solved piece model, None if it found none."""
    if model.lp.sol_status in (pulp.LpSolutionOptimal, pulp.LpSolutionIntegerFeasible):
        return pulp.value(model.lp.objective), aggregate.placed_counts(model)
    return None


def _piece_start(
    model: aggregate.PieceModel, placed: dict[XKey, int], name: SolverName
) -> dict[str, float] | None:
    """Every variable's value in `model` for `placed` (machines and routing solved with the
    pieces fixed there), as a start: the model then never ends worse than `placed`."""
    aggregate.fix_pieces(model, aggregate.instance_start(model, placed))
    model.lp.solve(solver_command(name, PIECES_MIN_S))
    aggregate.free_pieces(model)
    if model.lp.sol_status != pulp.LpSolutionOptimal:
        return None
    values = _nonzero({v.name: v.value() or 0.0 for v in model.lp.variables()})
    if name == SolverName.CBC:
        for var in model.lp.variables():
            var.setInitialValue(values.get(var.name, 0.0))
    return values


def _improve(built: BuiltModel, solved: RunOutcome, deadline: float, mip_gap: float) -> RunOutcome:
    """Polish the split `built` from its current solution for the time left (if
    `INSTANCES_MIN_S` or more) without the merged totals: the instance counts may change, over
    the merged plan's templates and the split's extra ones (a plan that is cheapest merged may
    leave machines half used once split). A local search over neighbourhoods (`_neighbourhoods`):
    the counts outside one stay fixed (machines and routing stay free everywhere), the rest is
    solved from the current plan for at most `NEIGHBOURHOOD_S`, stopping within `mip_gap` (the
    caller's, not `SPLIT_MIP_GAP`); rounds until one improves nothing. On scenario (d) one MILP
    over the whole split found nothing in 6 s where the neighbourhoods found 2 %. The best
    solution found is left in `built`."""
    if deadline - time.perf_counter() < INSTANCES_MIN_S:
        return solved
    aggregate.drop_totals(built)
    built.problem = replace(built.problem, mip_gap=mip_gap)
    values = {v.name: v.value() or 0.0 for v in built.lp.variables()}
    best, improved = solved, True
    while improved:
        improved = False
        for free in _neighbourhoods(built):
            if deadline - time.perf_counter() < INSTANCES_MIN_S:
                break
            limit = min(NEIGHBOURHOOD_S, _left(deadline))
            outcome = _solve_neighbourhood(built, free, values, limit)
            if _better(outcome, best, Mode.COST):
                best, improved = outcome, True
                values = {v.name: v.value() or 0.0 for v in built.lp.variables()}
    for var in built.lp.variables():
        var.varValue = values[var.name]
    return best


def _neighbourhoods(built: BuiltModel) -> list[set[XKey]]:
    """The instance counts `_improve` frees at a time: those of the templates the plan uses (in
    every location), then those on one GPU type and pricing class in every location (where
    scarce machines moved), then those in one pair of locations."""
    by_gpu: dict[tuple[str, Pricing], set[XKey]] = defaultdict(set)
    by_location: dict[Location, set[XKey]] = defaultdict(set)
    for key in built.x:
        for g in built.templates[key[0]].gpu_vector:
            by_gpu[(g, key[2])].add(key)
        by_location[key[1]].add(key)
    pairs = itertools.combinations(sorted(by_location), 2)
    used = {tid for (tid, _loc, _c), var in built.x.items() if (var.value() or 0.0) > 0.5}
    own = {key for key in built.x if key[0] in used}
    return (
        [own]
        + [by_gpu[k] for k in sorted(by_gpu)]
        + [by_location[a] | by_location[b] for a, b in pairs]
    )


def _solve_neighbourhood(
    built: BuiltModel, free: set[XKey], values: dict[str, float], limit_s: float
) -> RunOutcome:
    """Solve `built` from `values` with the instance counts outside `free` fixed to theirs."""
    bounds = {key: (var.lowBound, var.upBound) for key, var in built.x.items()}
    for key, var in built.x.items():
        if key not in free:
            var.lowBound = var.upBound = round(values[var.name])
    try:
        return run(built, built.problem.solver, limit_s, _nonzero(values))
    finally:
        for key, var in built.x.items():
            var.lowBound, var.upBound = bounds[key]


def _nonzero(values: dict[str, float]) -> dict[str, float]:
    """Solvers return -1e-13 for 0; CBC rejects such a start."""
    return {name: value for name, value in values.items() if value > 1e-9}


def _run_mode(built: BuiltModel, deadline: float, values: dict[str, float] | None) -> RunOutcome:
    """One solve in cost mode; two in goodput mode (served first, then cost at that level)."""
    problem = built.problem
    if problem.mode == Mode.COST:
        set_cost_objective(built)
        return run(built, problem.solver, _left(deadline), values)
    set_served_objective(built)
    first = run(built, problem.solver, _left(deadline), values)
    if first.status is PlanStatus.INFEASIBLE or first.objective is None:
        return first
    fix_served(built, first.objective)
    set_cost_objective(built)
    second = run(built, problem.solver, _left(deadline), values)
    if second.status is PlanStatus.INFEASIBLE:  # stage 2 timed out: keep stage 1's answer
        return first
    status = PlanStatus.OPTIMAL
    if PlanStatus.FEASIBLE in (first.status, second.status):
        status = PlanStatus.FEASIBLE
    return RunOutcome(status, first.objective, dual_bound=first.dual_bound)


def _better(a: RunOutcome, b: RunOutcome, mode: Mode) -> bool:
    """Whether outcome `a` has a strictly better primary objective than `b`."""
    if b.status is PlanStatus.INFEASIBLE or b.objective is None:
        return a.objective is not None
    if a.objective is None:
        return False
    if mode == Mode.GOODPUT:
        return a.objective > b.objective + 1e-6 * max(1.0, abs(b.objective))
    return a.objective < b.objective - 1e-6 * max(1.0, abs(b.objective))


def _left(deadline: float) -> float:
    return max(deadline - time.perf_counter(), 0.1)


def transfer_values(src: BuiltModel, dst: BuiltModel) -> dict[str, float]:
    """Variable values of solved `src` as a start for `dst` (same offers and demands; `dst`'s
    templates a superset): matched by key, not by name."""
    values: dict[str, float] = {}
    for table in ("x", "y", "d", "e", "u", "z"):
        target = getattr(dst, table)
        for key, var in getattr(src, table).items():
            if key in target:
                values[target[key].name] = float(var.value() or 0.0)
    return _nonzero(values)


def _gap(objective: float | None, bound: float | None) -> float | None:
    """|objective - bound| / |objective| (0 when both are 0)."""
    if objective is None or bound is None:
        return None
    if abs(objective) < 1e-12:
        return 0.0 if abs(bound) < 1e-9 else None
    return abs(objective - bound) / abs(objective)
