"""Why a placement problem is infeasible, in words that name what binds.

Order of diagnosis: (1) structural checks that need no solver (empty inventory, a model with no
template, no template within its SLO, none whose GPU types are offered, none that fits an offered
machine); (2) optional constraints relaxed one at a time (budget, churn cap, spot share): the
first whose removal makes all demand servable is named with the figures; (3) otherwise the
inventory binds: a goodput solve shows which models fall short and which GPU types are sold out
in which regions.
"""

from __future__ import annotations

from dataclasses import replace

from planning.domain import ModelDemand, Phase, Template
from planning.placement.milp import BuiltModel, eligible_templates, meets_slo, slots
from planning.placement.plan import Plan, PlanKind, PlanStatus
from planning.placement.problem import Mode, PlacementProblem


def precheck(problem: PlacementProblem) -> str | None:
    """Structural reasons some demanded model cannot be served at all, or None."""
    if not any(o.available_count > 0 for o in problem.offers):
        return "empty inventory: no machine is offered (every available_count is 0 or no offers)"
    eligible = eligible_templates(problem)  # once: it scans every template
    own: dict[str, list] = {}
    for t in problem.templates:
        own.setdefault(t.model, []).append(t)
    every = [t for ts in eligible.values() for t in ts]
    placed = {tid for tid, _loc, _c in slots(problem, every)}  # once: it scans every offer
    reasons = [
        r
        for d in problem.demands
        if d.rate_req_per_s > 0
        and (r := _model_reason(d, own.get(d.model, []), eligible.get(d.model, ()), placed))
    ]
    return "; ".join(reasons) or None


def _model_reason(
    demand: ModelDemand, own: list[Template], eligible: tuple, placed: set[str]
) -> str | None:
    """Why `demand` cannot be served at all (None: it may be); `placed`: the ids of templates
    with a slot (`slots`)."""
    model = demand.model
    if not own:
        return f"model {model}: no templates (unknown model, or templates not built for it)"
    same_class = [t for t in own if t.workload_class == demand.workload_class]
    if not same_class:
        classes = sorted({t.workload_class for t in own})
        return f"model {model}: no templates for workload class {demand.workload_class!r} (has {classes})"
    within = [t for t in same_class if meets_slo(t, demand)]
    if not within:
        return (
            f"model {model}: SLO (TTFT {demand.ttft_slo_s} s, TPOT {demand.tpot_slo_s} s) is "
            f"below what any template achieves ({_best_latencies(same_class)})"
        )
    if not eligible:
        needed = sorted({g for t in within for g in t.gpu_vector})
        return f"model {model}: its templates need GPU types {needed}, none of which is offered"
    phases = {t.phase for t in eligible if t.template_id in placed}
    if Phase.COLOCATED not in phases and not {Phase.PREFILL, Phase.DECODE} <= phases:
        return (
            f"model {model}: no region offers machines large enough for both a prefill and a "
            f"decode template (or a colocated one); stage sizes exceed offered machines"
        )
    return None


def _best_latencies(templates: list) -> str:
    parts = []
    for phase in (Phase.PREFILL, Phase.DECODE, Phase.COLOCATED):
        values = [t.latency_s for t in templates if t.phase is phase and t.latency_s is not None]
        if values:
            parts.append(f"best {phase} latency {min(values):.3g} s")
    return ", ".join(parts) or "no latencies recorded"


def explain_infeasible(problem: PlacementProblem) -> str:
    """A sentence naming what binds; see the module docstring for the order of checks."""
    from planning.placement.solve import solve_core  # solve imports this module

    structural = precheck(problem)
    if structural:
        return structural
    for name, relaxed in _relaxations(problem):
        outcome = solve_core(replace(relaxed, mode=Mode.COST)).outcome
        if outcome.status is not PlanStatus.INFEASIBLE:
            return _relaxation_sentence(name, problem, outcome.objective)
    return _inventory_sentence(problem)


def _relaxations(problem: PlacementProblem) -> list[tuple[str, PlacementProblem]]:
    out = []
    if problem.budget_usd_per_hr is not None:
        out.append(("budget", replace(problem, budget_usd_per_hr=None)))
    if problem.churn is not None and problem.churn.max_changes is not None:
        out.append(("churn cap", replace(problem, churn=replace(problem.churn, max_changes=None))))
    if problem.max_spot_share is not None:
        out.append(("spot share", replace(problem, max_spot_share=None)))
    return out


def _relaxation_sentence(name: str, problem: PlacementProblem, cost: float | None) -> str:
    if name == "budget":
        return (
            f"budget binds: ${problem.budget_usd_per_hr:,.2f}/h is below the cheapest plan that "
            f"serves all demand (${cost or 0:,.2f}/h)"
        )
    if name == "churn cap":
        cap = problem.churn.max_changes if problem.churn else None
        return f"churn cap binds: serving all demand needs more than {cap} instance changes"
    return (
        f"spot share binds: with at most {problem.max_spot_share:.0%} of each model's GPUs on "
        "spot, on-demand inventory cannot serve all demand"
    )


def _inventory_sentence(problem: PlacementProblem) -> str:
    from planning.placement.solve import solve_core

    # locations kept apart: the sentence names the regions that are sold out
    solved = solve_core(replace(problem, mode=Mode.GOODPUT), merge=False)
    built, outcome = solved.built, solved.outcome
    if outcome.status is PlanStatus.INFEASIBLE:
        return "no plan satisfies the constraints even with demand dropped (check churn and budget)"
    short = []
    for d in problem.demands:
        var = built.u.get(d.model)
        frac = float(var.value() or 0.0) if var is not None else 1.0
        if frac < 1 - 1e-6:
            short.append(
                f"model {d.model} can be served only {frac:.0%} of {d.rate_req_per_s:.3g} "
                f"req/s ({_sold_out(problem, built, d.model)})"
            )
    return "inventory binds: " + ("; ".join(short) or "demand exceeds what offers can host")


def _sold_out(problem: PlacementProblem, built: BuiltModel, model: str) -> str:
    """Machines of the GPU types this model uses that are rented to the last one, by location."""
    gpu_types = {g for t in eligible_templates(problem).get(model, ()) for g in t.gpu_vector}
    avail: dict[tuple[str, str, str, str, int], list[int]] = {}
    for i, o in enumerate(problem.offers):
        if o.gpu_type in gpu_types and o.available_count > 0:
            key = (o.gpu_type, o.cloud, o.region, str(o.pricing), o.gpu_count)
            acc = avail.setdefault(key, [0, 0])
            acc[0] += o.available_count
            var = built.y.get(i)
            acc[1] += round(var.value() or 0) if var is not None else 0
    full = sorted(
        f"{g} in {c}/{r} ({p}, {n}-GPU machines)"
        for (g, c, r, p, n), (a, rented) in avail.items()
        if rented >= a
    )
    return "sold out: " + ", ".join(full) if full else "GPU types it needs are not offered enough"


def unserved_note(problem: PlacementProblem) -> str | None:
    """In goodput mode, models left unserved for structural reasons (else None)."""
    if problem.mode == Mode.GOODPUT:
        return precheck(problem)
    return None


def infeasible_plan(problem: PlacementProblem, kind: PlanKind, solve_s: float, why: str) -> Plan:
    """The plan value for an infeasible problem: empty, with the explanation."""
    return Plan(
        kind=kind,
        mode=str(problem.mode),
        solver=str(problem.solver),
        status=PlanStatus.INFEASIBLE,
        objective=None,
        cost_usd_per_hr=None,
        lp_bound=None,
        gap=None,
        solve_s=solve_s,
        assignments=(),
        rentals=(),
        demand_splits=(),
        services=(),
        explanation=why,
    )
