"""Baselines as restrictions of the template set, solved by the same MILP (same plan shape).

- homogeneous: each model on one GPU type, colocated single-machine replicas (plain vLLM).
- melange: each model on a mix of GPU types, one type per replica, colocated, single-stage
  (Mélange, Griggs et al. 2024).
- homogeneous_pd: P/D disaggregated, one GPU type per model for both phases, single-stage
  (DistServe-like).
"Best GPU type" for the one-type baselines: the type with the lowest $ per req/s at its cheapest
offered $/GPU-h among those whose offered GPUs could carry the model's demand alone; when none
can, the type that covers the largest share of it. Region, pricing and counts are then chosen by
the MILP, so the baselines are as good as their restriction allows, not straw men.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import replace

from planning.domain import ModelDemand, Phase, Template
from planning.placement.candidates import usd_per_gpu_hr_by_stage
from planning.placement.milp import capacity, eligible_templates
from planning.placement.plan import Plan, PlanKind
from planning.placement.problem import PlacementProblem
from planning.placement.solve import solve


def solve_baseline(kind: PlanKind, problem: PlacementProblem) -> Plan:
    """Solve `problem` with only the templates baseline `kind` may use."""
    return solve(restrict(kind, problem), kind=kind)


def best_start(plans: list[Plan]) -> Plan | None:
    """The warm start for Coral among baseline plans: most served req/s, then cheapest, among
    the feasible ones (None if none is). Coral started from it is never worse than any."""
    feasible = [p for p in plans if p.feasible]
    if not feasible:
        return None
    return min(feasible, key=lambda p: (-round(p.served_req_per_s, 6), p.cost_usd_per_hr or 0))


def restrict(kind: PlanKind, problem: PlacementProblem) -> PlacementProblem:
    """The same problem with the template set cut down to what baseline `kind` allows."""
    if kind == PlanKind.CORAL:
        return problem
    single = [t for t in problem.templates if len(t.stages) == 1]
    phases = {Phase.PREFILL, Phase.DECODE} if kind == PlanKind.HOMOGENEOUS_PD else {Phase.COLOCATED}
    allowed = tuple(t for t in single if t.phase in phases)
    if kind == PlanKind.MELANGE:
        return replace(problem, templates=allowed)
    sub = replace(problem, templates=allowed)
    eligible = eligible_templates(sub)
    # a 1-GPU stage fits any machine: the cheapest $/GPU-h of each type
    prices = {g: p for (g, tp), p in usd_per_gpu_hr_by_stage(problem.offers).items() if tp == 1}
    gpus = _offered_gpus(problem)
    kept: list[Template] = []
    for demand in problem.demands:
        ts = eligible.get(demand.model, ())
        best = _best_gpu_type(ts, demand, prices, gpus, problem.headroom)
        kept.extend(t for t in ts if best is not None and t.stages[0].gpu_type == best)
    return replace(problem, templates=tuple(kept))


def _offered_gpus(problem: PlacementProblem) -> dict[str, int]:
    totals: dict[str, int] = defaultdict(int)
    for o in problem.offers:
        totals[o.gpu_type] += o.available_count * o.gpu_count
    return totals


def _gpus_per_req_s(ts: list[Template], demand: ModelDemand) -> float | None:
    """GPUs one req/s needs with the most GPU-efficient templates in `ts` (None if impossible)."""

    def best(phase: Phase, tokens: float) -> float | None:
        per = [t.total_gpus * tokens / capacity(t) for t in ts if t.phase == phase and capacity(t)]
        return min(per) if per else None

    coloc = best(Phase.COLOCATED, 1.0)
    if coloc is not None:
        return coloc
    pre = best(Phase.PREFILL, demand.mean_input_tokens)
    dec = best(Phase.DECODE, demand.mean_output_tokens)
    return pre + dec if pre is not None and dec is not None else None


def _best_gpu_type(
    ts: tuple[Template, ...],
    demand: ModelDemand,
    prices: dict[str, float],
    gpus: dict[str, int],
    headroom: float,
) -> str | None:
    """Cheapest GPU type per req/s that can carry the demand alone, else the best-covering one."""
    scored = []
    for g in sorted({t.stages[0].gpu_type for t in ts}):
        need = _gpus_per_req_s([t for t in ts if t.stages[0].gpu_type == g], demand)
        if need is None or g not in prices:
            continue
        required = need * demand.rate_req_per_s * (1 + headroom)
        coverage = gpus.get(g, 0) / required if required else float("inf")
        scored.append((coverage >= 1.0, need * prices[g], coverage, g))
    fits = [s for s in scored if s[0]]
    if fits:
        return min(fits, key=lambda s: s[1])[3]
    return max(scored, key=lambda s: s[2])[3] if scored else None
