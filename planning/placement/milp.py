r"""The placement MILP: `build(problem)` makes the PuLP model, `extract(built, ...)` reads a plan.

Formulation (final form; DESIGN.md "Placement MILP" is the sketch it refines)
----------------------------------------------------------------------------
Sets
  m ∈ M   models with demand > 0;  l ∈ L  locations (cloud, region; zones are aggregated by the
  inventory reader);  c ∈ {on_demand, spot};  g  GPU types;  o ∈ O  offers (instance type i at
  (l, c): `gpus_o` GPUs of type g_o per machine, price p_o $/h per machine, `avail_o` machines).
  T_m  templates of model m that are *eligible*: same workload class as m's demand, latency within
  m's SLO (prefill latency ≤ TTFT, decode latency ≤ TPOT, colocated latency read as TTFT), every
  GPU type offered.  P_m, D_m, K_m ⊆ T_m  its prefill, decode and colocated templates.
  (t, l, c) is a *slot* when every stage of t (tp GPUs of type g) fits in one offered machine of
  type g at (l, c), i.e. some o there has g_o = g and gpus_o ≥ tp.
Parameters
  λ_m req/s, in_m / out_m mean input / output tokens, w_m priority, h headroom;
  cap_t  tokens/s (P, D) or req/s (colocated);  n_{t,g}^{≥k}  GPUs of type g in stages of t with
  tp ≥ k;  n_t  all GPUs of t;  s  max spot share;  B  budget $/h;  x⁰  previous counts.
Variables
  x[t,l,c] ∈ ℤ≥0 template instances (slots only);  y[o] ∈ ℤ≥0 machines rented;
  d[m,l] ≥ 0 req/s served P/D-disaggregated at l;  e[m,l] ≥ 0 req/s served colocated at l;
  u_m ∈ [0,1] served fraction (goodput mode; fixed to 1 in cost mode);
  z[t,l,c] ≥ 0 churn |x − x⁰| (only with churn).
Constraints (in C2, C3, C3c cap_t is clipped to the most the model can ask of that phase,
(1+h) λ_m in_m, (1+h) λ_m out_m or (1+h) λ_m: every integer plan stays feasible and the LP
relaxation must rent a whole instance for a model whose demand is below one; see `max_need`)
  C1  Σ_l (d[m,l] + e[m,l]) = u_m λ_m                                       ∀ m
  C2  Σ_{t∈P_m, c} cap_t x[t,l,c] ≥ (1+h) in_m d[m,l]                       ∀ m, l
  C3  Σ_{t∈D_m, c} cap_t x[t,l,c] ≥ (1+h) out_m d[m,l]                      ∀ m, l
      (P and D of a request share a location: the KV cache does not cross regions)
  C3c Σ_{t∈K_m, c} cap_t x[t,l,c] ≥ (1+h) e[m,l]                            ∀ m, l
  C4  Σ_t n_{t,g}^{≥k} x[t,l,c] ≤ Σ_{o at (l,c), g_o=g, gpus_o ≥ k} gpus_o y[o]   ∀ l, c, g, k
      for each stage size k used there. With k = the smallest size this is "template GPUs fit
      in rented GPUs"; larger k keep big stages off small machines. With power-of-two stage and
      machine sizes these nested conditions are exactly what buddy packing needs, so whole
      stages pack into whole machines.
  C5  y[o] ≤ avail_o                                                        ∀ o (as a bound)
  C6  Σ_{t∈T_m, l} n_t x[t,l,spot] ≤ s Σ_{t∈T_m, l, c} n_t x[t,l,c]         ∀ m (optional)
  C7  z ≥ x − x⁰,  z ≥ x⁰ − x;  Σ z + (previous instances with no slot now) ≤ cap  (optional)
  C8  Σ_o p_o y[o] ≤ B                                                      (optional)
Objectives
  cost     min Σ_o p_o y[o] + π Σ z                      (π = churn penalty $/h per change)
  goodput  lexicographic, two solves: (1) max Σ_m w_m λ_m u_m; (2) fix that value (less 1e-6
           relative) and min cost as above. Two solves instead of max Σ w λ u − ε·cost because
           no fixed ε is safe: a machine's price / its served req/s varies by orders of magnitude.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

import pulp

from planning.domain import ModelDemand, Offer, Phase, Pricing, Template
from planning.placement.plan import (
    Assignment,
    DemandSplit,
    ModelService,
    Plan,
    PlanKind,
    PlanStatus,
    Rental,
)
from planning.placement.problem import Mode, PlacementProblem, Slot

Location = tuple[str, str]  # (cloud, region)
XKey = tuple[str, Location, Pricing]  # (template_id, location, pricing)
Term = tuple[pulp.LpVariable, float]  # (variable, coefficient)


def linear(terms: Iterable[Term]) -> pulp.LpAffineExpression:
    """Σ coefficient·variable, built as one dict (repeated variables add up). `pulp.lpSum` of
    `coefficient * variable` makes (and copies) an expression per term, which dominated the
    time to build scenario (d)'s model."""
    coefficients: dict[pulp.LpVariable, float] = defaultdict(float)
    for var, coefficient in terms:
        coefficients[var] += coefficient
    return pulp.LpAffineExpression(coefficients)


@dataclass(slots=True)
class BuiltModel:
    """A built PuLP model with its variables, keyed by the sets of the formulation."""

    problem: PlacementProblem
    lp: pulp.LpProblem
    relaxed: bool
    templates: dict[str, Template]
    x: dict[XKey, pulp.LpVariable]
    y: dict[int, pulp.LpVariable]
    d: dict[tuple[str, Location], pulp.LpVariable]
    e: dict[tuple[str, Location], pulp.LpVariable]
    u: dict[str, pulp.LpVariable]
    z: dict[XKey, pulp.LpVariable]
    cost: pulp.LpAffineExpression
    churn_penalty: pulp.LpAffineExpression
    served: pulp.LpAffineExpression
    churn_constant: int = 0
    constraints: dict[str, list[str]] = field(default_factory=dict)


def eligible_templates(problem: PlacementProblem) -> dict[str, tuple[Template, ...]]:
    """Per demanded model, the templates the MILP may use (class, SLO and GPU types match)."""
    offered = {o.gpu_type for o in problem.offers if o.available_count > 0}
    by_model: dict[str, list[Template]] = defaultdict(list)
    demands = {d.model: d for d in problem.demands}
    for t in problem.templates:
        demand = demands.get(t.model)
        if demand is None or t.workload_class != demand.workload_class:
            continue
        if meets_slo(t, demand) and set(t.gpu_vector) <= offered:
            by_model[t.model].append(t)
    return {m: tuple(ts) for m, ts in by_model.items()}


def meets_slo(t: Template, demand: ModelDemand) -> bool:
    """Whether the template's evaluated latency is within the demand's SLO (None: trusted)."""
    if t.latency_s is None:
        return True
    limit = demand.tpot_slo_s if t.phase == Phase.DECODE else demand.ttft_slo_s
    return t.latency_s <= limit


def capacity(t: Template) -> float:
    """Tokens/s for prefill/decode templates, req/s for colocated ones."""
    value = t.throughput_req_per_s if t.phase == Phase.COLOCATED else t.throughput_tokens_per_s
    return float(value or 0.0)


def _machine_sizes(offers: Iterable[Offer]) -> dict[tuple[Location, Pricing, str], int]:
    """Largest machine (GPUs) offered per location, pricing and GPU type."""
    sizes: dict[tuple[Location, Pricing, str], int] = {}
    for o in offers:
        if o.available_count > 0:
            key = ((o.cloud, o.region), o.pricing, o.gpu_type)
            sizes[key] = max(sizes.get(key, 0), o.gpu_count)
    return sizes


def slots(problem: PlacementProblem, templates: Iterable[Template]) -> list[XKey]:
    """Every (template, location, pricing) where each stage fits in one offered machine."""
    sizes = _machine_sizes(problem.offers)
    places = sorted({(loc, c) for (loc, c, _g) in sizes})
    fits: dict[tuple[tuple[str, int], ...], list[tuple[Location, Pricing]]] = {}
    keys: list[XKey] = []
    for t in templates:
        need = tuple((s.gpu_type, s.tp) for s in t.stages)  # shared by many templates
        if need not in fits:
            fits[need] = [
                (loc, c)
                for loc, c in places
                if all(sizes.get((loc, c, g), 0) >= k for g, k in need)
            ]
        keys.extend((t.template_id, loc, c) for loc, c in fits[need])
    return keys


def build(problem: PlacementProblem, *, relaxed: bool = False) -> BuiltModel:
    """Build the MILP (or its LP relaxation) with the cost objective set; see module docstring."""
    eligible = eligible_templates(problem)
    templates = {t.template_id: t for ts in eligible.values() for t in ts}
    cat = pulp.LpContinuous if relaxed else pulp.LpInteger
    lp = pulp.LpProblem("coral_placement", pulp.LpMinimize)
    x = {
        k: pulp.LpVariable(f"x{i}", lowBound=0, cat=cat)
        for i, k in enumerate(slots(problem, templates.values()))
    }
    used = {(loc, c, g) for (tid, loc, c) in x for g in templates[tid].gpu_vector}
    y = {
        i: pulp.LpVariable(f"y{i}", lowBound=0, upBound=o.available_count, cat=cat)  # C5
        for i, o in enumerate(problem.offers)
        if ((o.cloud, o.region), o.pricing, o.gpu_type) in used and o.available_count > 0
    }
    built = BuiltModel(
        problem=problem,
        lp=lp,
        relaxed=relaxed,
        templates=templates,
        x=x,
        y=y,
        d={},
        e={},
        u={},
        z={},
        cost=linear((v, problem.offers[i].price_usd_per_hr) for i, v in y.items()),
        churn_penalty=pulp.LpAffineExpression(),
        served=pulp.LpAffineExpression(),
    )
    _add_demand(built)
    _add_gpu_fit(built)
    _add_spot_share(built)
    _add_churn(built)
    _add_budget(built)
    set_cost_objective(built)
    return built


def _add_demand(b: BuiltModel) -> None:
    """C1, C2, C3, C3c: demand split and capacity per model and location."""
    p = b.problem
    by_model_loc: dict[tuple[str, Location], dict[Phase, list[Term]]] = defaultdict(
        lambda: defaultdict(list)
    )
    demands = {m.model: m for m in p.demands}
    for (tid, loc, _c), var in b.x.items():
        t = b.templates[tid]
        cap = clipped_capacity(t, demands[t.model], p.headroom)
        by_model_loc[(t.model, loc)][t.phase].append((var, cap))
    served_terms = []
    for m in (dem for dem in p.demands if dem.rate_req_per_s > 0):
        if p.mode == Mode.GOODPUT:
            b.u[m.model] = pulp.LpVariable(f"u_{len(b.u)}", lowBound=0, upBound=1)
        routed = [
            _route(b, m, loc, caps) for (mm, loc), caps in by_model_loc.items() if mm == m.model
        ]
        target = b.u[m.model] * m.rate_req_per_s if m.model in b.u else m.rate_req_per_s
        b.lp += pulp.lpSum(routed) == target, f"C1_{_safe(m.model)}"
        served_terms.append(m.priority * target)
    b.served = pulp.lpSum(served_terms)


def clipped_capacity(t: Template, m: ModelDemand, headroom: float) -> float:
    """The template's capacity as C2/C3/C3c count it: clipped to `max_need` of its model."""
    return min(capacity(t), max_need(m, t.phase, headroom))


def max_need(m: ModelDemand, phase: Phase, headroom: float) -> float:
    """The most capacity model m can ever ask of one phase at one location (all its demand
    there): tokens/s for prefill and decode, req/s colocated. Capacities above it are clipped to
    it in C2/C3/C3c, which keeps every integer plan feasible and tightens the LP relaxation
    (an instance bigger than all demand must still be rented whole)."""
    per_req = {Phase.PREFILL: m.mean_input_tokens, Phase.DECODE: m.mean_output_tokens}
    return (1.0 + headroom) * per_req.get(phase, 1.0) * m.rate_req_per_s


def _route(
    b: BuiltModel, m: ModelDemand, loc: Location, caps: dict[Phase, list[Term]]
) -> pulp.LpAffineExpression:
    """Variables d, e of model m at loc with their capacity constraints; returns d + e."""
    tag = f"{_safe(m.model)}_{_safe(loc[0])}_{_safe(loc[1])}"
    # variables numbered, not tagged: PuLP orders columns by name and HiGHS's time-limited
    # search follows the column order (scenario (d)'s 20 s plan moved by 2 % on names alone)
    names = (f"d_{len(b.d)}", f"e_{len(b.e)}")
    d, e = capacity_rows(b.lp, m, caps, b.problem.headroom, tag, names)
    if d is not None:
        b.d[(m.model, loc)] = d
    if e is not None:
        b.e[(m.model, loc)] = e
    return pulp.lpSum(v for v in (d, e) if v is not None)


def capacity_rows(
    lp: pulp.LpProblem,
    m: ModelDemand,
    caps: dict[Phase, list[Term]],
    headroom: float,
    tag: str,
    names: tuple[str, str],
) -> tuple[pulp.LpVariable | None, pulp.LpVariable | None]:
    """C2, C3, C3c of model m at one location, given the (instance variable, capacity) terms
    there per phase: req/s d served P/D-disaggregated within prefill and decode capacity (only
    with both), req/s e served colocated within colocated capacity. Returns (d, e), None where
    the location lacks the templates; `names` are theirs, `tag` ends the rows' names. Also
    used to place a split's pieces (`aggregate`)."""
    grow = 1.0 + headroom
    d = e = None
    if caps.get(Phase.PREFILL) and caps.get(Phase.DECODE):
        d = pulp.LpVariable(names[0], lowBound=0)
        lp += linear(caps[Phase.PREFILL]) >= grow * m.mean_input_tokens * d, f"C2_{tag}"
        lp += linear(caps[Phase.DECODE]) >= grow * m.mean_output_tokens * d, f"C3_{tag}"
    if caps.get(Phase.COLOCATED):
        e = pulp.LpVariable(names[1], lowBound=0)
        lp += linear(caps[Phase.COLOCATED]) >= grow * e, f"C3c_{tag}"
    return d, e


def _add_gpu_fit(b: BuiltModel) -> None:
    """C4: template GPUs of each type and stage size fit in rented machines there."""
    demand: dict[tuple[Location, Pricing, str], list[tuple[int, XKey]]] = defaultdict(list)
    for key in b.x:
        tid, loc, c = key
        for s in b.templates[tid].stages:
            demand[(loc, c, s.gpu_type)].append((s.tp, key))
    supply: dict[tuple[Location, Pricing, str], list[int]] = defaultdict(list)
    for i in b.y:
        o = b.problem.offers[i]
        supply[((o.cloud, o.region), o.pricing, o.gpu_type)].append(i)
    for group, stages in demand.items():
        for k in sorted({tp for tp, _ in stages}):
            lhs = linear((b.x[key], tp) for tp, key in stages if tp >= k)
            rhs = linear(
                (b.y[i], b.problem.offers[i].gpu_count)
                for i in supply[group]
                if b.problem.offers[i].gpu_count >= k
            )
            loc, c, g = group
            b.lp += lhs <= rhs, f"C4_{_safe(loc[0])}_{_safe(loc[1])}_{c}_{_safe(g)}_{k}"


def _add_spot_share(b: BuiltModel) -> None:
    """C6: each model's GPUs on spot are at most `max_spot_share` of its GPUs."""
    share = b.problem.max_spot_share
    if share is None:
        return
    spot: dict[str, list[Term]] = defaultdict(list)
    total: dict[str, list[Term]] = defaultdict(list)
    for (tid, _loc, c), var in b.x.items():
        t = b.templates[tid]
        total[t.model].append((var, t.total_gpus))
        if c == Pricing.SPOT:
            spot[t.model].append((var, t.total_gpus))
    for model, terms in spot.items():
        b.lp += linear(terms) <= share * linear(total[model]), f"C6_{_safe(model)}"


def _add_churn(b: BuiltModel) -> None:
    """C7: |x - x_prev| as z variables; penalty in the objective and/or a hard cap."""
    churn = b.problem.churn
    if churn is None:
        return
    previous: dict[XKey, int] = defaultdict(int)
    for slot, count in churn.previous:
        previous[(slot.template_id, (slot.cloud, slot.region), slot.pricing)] += count
    b.churn_constant = sum(n for k, n in previous.items() if k not in b.x)
    for i, (key, var) in enumerate(b.x.items()):
        prev = previous.get(key, 0)
        z = b.z[key] = pulp.LpVariable(f"z{i}", lowBound=0)
        b.lp += z >= var - prev, f"C7a_{i}"
        b.lp += z >= prev - var, f"C7b_{i}"
    changes = pulp.lpSum(b.z.values()) + b.churn_constant
    b.churn_penalty = churn.penalty_usd_per_hr_per_change * changes
    if churn.max_changes is not None:
        b.lp += changes <= churn.max_changes, "C7_cap"


def _add_budget(b: BuiltModel) -> None:
    """C8: the rental bill stays within the budget."""
    if b.problem.budget_usd_per_hr is not None:
        b.lp += b.cost <= b.problem.budget_usd_per_hr, "C8_budget"


def set_cost_objective(b: BuiltModel) -> None:
    """Minimise $/h plus the churn penalty."""
    b.lp.sense = pulp.LpMinimize
    b.lp.setObjective(b.cost + b.churn_penalty)


def set_served_objective(b: BuiltModel) -> None:
    """Goodput stage 1: maximise priority-weighted served req/s."""
    b.lp.sense = pulp.LpMaximize
    b.lp.setObjective(b.served)


def fix_served(b: BuiltModel, value: float) -> None:
    """Goodput stage 2: keep weighted served req/s at its stage-1 optimum (less 1e-6 relative)."""
    b.lp += b.served >= value * (1 - 1e-6) - 1e-9, "goodput_fixed"


def _safe(text: str) -> str:
    return "".join(ch if ch.isalnum() else "_" for ch in text)


@dataclass(frozen=True, slots=True)
class SolveInfo:
    """What the solve step knows that the model does not: outcome, timing, bound."""

    kind: str
    status: str
    solver: str
    solve_s: float
    objective: float | None
    lp_bound: float | None
    gap: float | None
    explanation: str | None = None


def _stranded(built: BuiltModel, template: Template, loc: Location) -> bool:
    """An instance in a location where its model is routed no demand of its kind.

    The MILP is indifferent to such instances when they sit on GPUs of a machine it rents
    anyway (they cost nothing), but no request could ever reach them: the simulator found a
    prefill placed where its model had no decode and no demand. Dropping them changes no
    constraint's feasibility unless a spot-share bound (C6) or the churn terms (C7) count them,
    so they are kept in those cases.
    """
    p = built.problem
    if p.max_spot_share is not None or p.churn is not None:
        return False
    routed = built.e if template.phase == Phase.COLOCATED else built.d
    var = routed.get((template.model, loc))
    return var is None or (var.value() or 0.0) <= 1e-9


def extract(built: BuiltModel, info: SolveInfo) -> Plan:
    """Read a solved model into a Plan (variable values rounded to whole instances)."""
    p = built.problem
    templates = built.templates
    assignments = tuple(
        Assignment(
            template_id=tid,
            model=templates[tid].model,
            phase=templates[tid].phase,
            cloud=loc[0],
            region=loc[1],
            pricing=c,
            count=n,
            gpus=tuple(sorted(templates[tid].gpu_vector.items())),
        )
        for (tid, loc, c), var in built.x.items()
        if (n := _count(var)) > 0 and not _stranded(built, templates[tid], loc)
    )
    rentals = tuple(
        Rental(
            o.cloud,
            o.region,
            o.instance_type,
            o.pricing,
            o.gpu_type,
            o.gpu_count,
            n,
            o.price_usd_per_hr,
        )
        for i, var in built.y.items()
        if (n := _count(var)) > 0 and (o := p.offers[i]) is not None
    )
    return Plan(
        kind=PlanKind(info.kind),
        mode=str(p.mode),
        solver=info.solver,
        status=PlanStatus(info.status),
        objective=info.objective,
        cost_usd_per_hr=sum(r.count * r.price_usd_per_hr for r in rentals),
        lp_bound=info.lp_bound,
        gap=info.gap,
        solve_s=info.solve_s,
        assignments=assignments,
        rentals=rentals,
        demand_splits=_splits(built),
        services=read_services(built),
        churn_changes=_churn_changes(built),
        explanation=info.explanation,
    )


def _count(var: pulp.LpVariable) -> int:
    return round(var.value() or 0.0)


def _splits(b: BuiltModel) -> tuple[DemandSplit, ...]:
    keys = sorted(set(b.d) | set(b.e))
    rows = []
    for model, loc in keys:
        pd = b.d[(model, loc)].value() or 0.0 if (model, loc) in b.d else 0.0
        co = b.e[(model, loc)].value() or 0.0 if (model, loc) in b.e else 0.0
        if pd > 1e-9 or co > 1e-9:
            rows.append(DemandSplit(model, loc[0], loc[1], float(pd), float(co)))
    return tuple(rows)


def read_services(b: BuiltModel) -> tuple[ModelService, ...]:
    """Served fraction per demanded model (1 in cost mode) as read from a solved model."""
    rows = []
    for m in b.problem.demands:
        frac = float(b.u[m.model].value() or 0.0) if m.model in b.u else 1.0
        # goodput stage 2 may give back the 1e-6 tolerance it was allowed; snap it
        frac = 1.0 if frac > 1 - 1e-5 else max(0.0, frac)
        rows.append(ModelService(m.model, m.rate_req_per_s, frac, m.priority))
    return tuple(rows)


def _churn_changes(b: BuiltModel) -> int:
    churn = b.problem.churn
    if churn is None:
        return 0
    previous: dict[XKey, int] = defaultdict(int)
    for slot, count in churn.previous:
        previous[(slot.template_id, (slot.cloud, slot.region), slot.pricing)] += count
    now = {k: _count(v) for k, v in b.x.items()}
    return sum(abs(now.get(k, 0) - previous.get(k, 0)) for k in set(now) | set(previous))


def previous_from_plan(plan: Plan) -> tuple[tuple[Slot, int], ...]:
    """A plan's assignments as the `Churn.previous` of the next replan."""
    return tuple(
        (Slot(a.template_id, a.cloud, a.region, a.pricing), a.count) for a in plan.assignments
    )
