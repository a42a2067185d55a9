"""Per-plan cost report: pure arithmetic over frozen values read from the catalog.

Inputs are the rows of one plan (`plans`, `plan_rentals`, `plan_assignments` with each template's
GPU vector, `plan_demand` with the workload's mean token counts), its baseline plans, its
simulation runs and its inventory snapshot. Nothing here does IO; `catalog_db.reports_io` reads
the rows and writes the result.

Cost attribution to models (the rule `$ per million tokens` rests on)
-----------------------------------------------------------------------
Money is spent on rented machines, not on templates. A *pool* is (cloud, region, pricing,
GPU type); its cost is Σ machines × price over the plan's rentals in that pool. Each template
instance uses `count × gpu_count[g]` GPUs of each pool it runs in. A pool's cost is split among
models in proportion to the GPUs their template instances use in that pool, so GPUs rented but
idle (packing slack) are charged to the models that caused the rental, and per-model costs sum
to the plan's rented cost. A pool nobody uses is reported under the key `(unattributed)`.

Tokens served per model per hour = Σ_regions (pd_rate + coloc_rate) req/s × (mean input +
mean output tokens) × 3600 s; the rates are the served (not offered) demand of `plan_demand`.
`$ per million tokens = model $/h / (tokens per hour / 1e6)`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime

UNATTRIBUTED = "(unattributed)"
BASELINE_KINDS = ("homogeneous", "melange", "homogeneous_pd")


@dataclass(frozen=True, slots=True)
class PlanRow:
    """The columns of one `plans` row a report uses."""

    plan_id: str
    kind: str
    parent_plan_id: str | None
    mode: str
    status: str
    created_at: datetime | None
    objective: float | None
    cost_usd_per_hr: float | None
    lp_bound: float | None
    gap: float | None
    solve_s: float | None
    served_fraction: float | None
    snapshot_id: str | None
    workload_id: str | None
    stale: bool
    snapshot_age_s: float | None


@dataclass(frozen=True, slots=True)
class RentalRow:
    """Machines of one instance type rented in one region at one pricing class."""

    cloud: str
    region: str
    instance_type: str
    pricing: str
    gpu_type: str
    gpus_per_machine: int
    count: int
    price_usd_per_hr: float  # per machine

    @property
    def usd_per_hr(self) -> float:
        return self.count * self.price_usd_per_hr


@dataclass(frozen=True, slots=True)
class AssignmentRow:
    """`count` instances of one template in one region at one pricing class."""

    template_id: str
    model: str
    phase: str
    cloud: str
    region: str
    pricing: str
    count: int
    gpus_per_instance: tuple[tuple[str, int], ...]  # (gpu_type, gpu_count) per template instance


@dataclass(frozen=True, slots=True)
class DemandRow:
    """Served demand of one model in one region, with the workload's mean token counts."""

    model: str
    region: str
    pd_rate_req_per_s: float
    coloc_rate_req_per_s: float
    mean_input_tokens: float | None
    mean_output_tokens: float | None

    @property
    def tokens_per_hr(self) -> float | None:
        if self.mean_input_tokens is None or self.mean_output_tokens is None:
            return None
        rate = self.pd_rate_req_per_s + self.coloc_rate_req_per_s
        return rate * (self.mean_input_tokens + self.mean_output_tokens) * 3600.0


@dataclass(frozen=True, slots=True)
class SimRunRow:
    """One simulation of a plan; offered load is requests / simulated seconds."""

    sim_run_id: str
    plan_id: str
    policy: str
    created_at: datetime | None
    requests: int
    simulated_s: float | None
    slo_attainment: float | None
    goodput_req_per_s: float | None

    @property
    def offered_load_req_per_s(self) -> float | None:
        if not self.simulated_s:
            return None
        return self.requests / self.simulated_s


@dataclass(frozen=True, slots=True)
class SnapshotRow:
    """The inventory snapshot a plan was solved against."""

    snapshot_id: str
    source: str
    taken_at: datetime | None
    status: str


@dataclass(frozen=True, slots=True)
class PlanInputs:
    """Everything one plan report is computed from."""

    plan: PlanRow
    rentals: tuple[RentalRow, ...]
    assignments: tuple[AssignmentRow, ...]
    demand: tuple[DemandRow, ...]
    baselines: tuple[PlanRow, ...]
    baseline_rentals: Mapping[str, tuple[RentalRow, ...]]  # plan_id -> rentals
    sim_runs: tuple[SimRunRow, ...]  # of the plan and of its baselines
    snapshot: SnapshotRow | None


@dataclass(frozen=True, slots=True)
class BreakdownLine:
    """$/h of one key of one dimension, with its share of the plan total."""

    dimension: str  # model | gpu_type | region | pricing | cloud
    key: str
    usd_per_hr: float
    share: float | None


@dataclass(frozen=True, slots=True)
class PoolCost:
    """$/h and GPUs rented of one GPU type in one cloud region at one pricing class."""

    cloud: str
    region: str
    pricing: str
    gpu_type: str
    gpus: int
    usd_per_hr: float


@dataclass(frozen=True, slots=True)
class ModelCost:
    """A model's attributed $/h, tokens served and $ per million tokens."""

    model: str
    usd_per_hr: float
    gpus: float
    tokens_per_hr: float | None
    usd_per_million_tokens: float | None


@dataclass(frozen=True, slots=True)
class BaselineComparison:
    """A baseline's $/h against Coral's: ratio = baseline / Coral, savings = 1 − Coral / baseline."""

    plan_id: str
    kind: str
    status: str
    usd_per_hr: float | None
    ratio: float | None
    savings_fraction: float | None
    savings_usd_per_hr: float | None


@dataclass(frozen=True, slots=True)
class SimSummary:
    """One simulation point for the attainment-vs-load chart."""

    plan_id: str
    plan_kind: str
    sim_run_id: str
    policy: str
    offered_load_req_per_s: float | None
    slo_attainment: float | None
    goodput_req_per_s: float | None


@dataclass(frozen=True, slots=True)
class PlanReport:
    """The computed per-plan report."""

    plan: PlanRow
    total_usd_per_hr: float
    total_gpus: int
    breakdown: tuple[BreakdownLine, ...]
    pools: tuple[PoolCost, ...]
    models: tuple[ModelCost, ...]
    usd_per_million_tokens: float | None
    tokens_per_hr: float | None
    baselines: tuple[BaselineComparison, ...]
    sims: tuple[SimSummary, ...]
    slo_attainment: float | None  # of the Coral plan's latest simulation, if any
    goodput_req_per_s: float | None
    gap: float | None
    solve_s: float | None
    snapshot: SnapshotRow | None
    stale: bool
    snapshot_age_s: float | None


def rented_usd_per_hr(rentals: Iterable[RentalRow]) -> float:
    """Σ machines × price per machine-hour."""
    return sum(r.usd_per_hr for r in rentals)


def plan_usd_per_hr(plan: PlanRow, rentals: Iterable[RentalRow]) -> float | None:
    """The plan's $/h: its rentals when it has any, else its recorded `cost_usd_per_hr`."""
    rows = tuple(rentals)
    if rows:
        return rented_usd_per_hr(rows)
    return plan.cost_usd_per_hr


def breakdown(rentals: tuple[RentalRow, ...], dimension: str) -> tuple[BreakdownLine, ...]:
    """$/h summed by one rental attribute (gpu_type, region, pricing or cloud), largest first."""
    totals: dict[str, float] = defaultdict(float)
    for rental in rentals:
        totals[str(getattr(rental, dimension))] += rental.usd_per_hr
    grand = sum(totals.values())
    return tuple(
        BreakdownLine(dimension, key, usd, usd / grand if grand else None)
        for key, usd in sorted(totals.items(), key=lambda kv: (-kv[1], kv[0]))
    )


def pool_costs(rentals: Iterable[RentalRow]) -> tuple[PoolCost, ...]:
    """$/h and GPUs per (cloud, region, pricing, GPU type), as the view plan_cost_by_gpu_region."""
    usd: dict[tuple[str, str, str, str], float] = defaultdict(float)
    gpus: dict[tuple[str, str, str, str], int] = defaultdict(int)
    for r in rentals:
        key = (r.cloud, r.region, r.pricing, r.gpu_type)
        usd[key] += r.usd_per_hr
        gpus[key] += r.count * r.gpus_per_machine
    return tuple(PoolCost(*key, gpus[key], usd[key]) for key in sorted(usd))


def _pool_costs(rentals: Iterable[RentalRow]) -> dict[tuple[str, str, str, str], float]:
    pools: dict[tuple[str, str, str, str], float] = defaultdict(float)
    for r in rentals:
        pools[(r.cloud, r.region, r.pricing, r.gpu_type)] += r.usd_per_hr
    return pools


def _pool_gpus_by_model(
    assignments: Iterable[AssignmentRow],
) -> dict[tuple[str, str, str, str], dict[str, float]]:
    usage: dict[tuple[str, str, str, str], dict[str, float]] = defaultdict(
        lambda: defaultdict(float)
    )
    for a in assignments:
        for gpu_type, gpus in a.gpus_per_instance:
            usage[(a.cloud, a.region, a.pricing, gpu_type)][a.model] += a.count * gpus
    return usage


def attribute_cost_to_models(
    rentals: tuple[RentalRow, ...], assignments: tuple[AssignmentRow, ...]
) -> tuple[dict[str, float], dict[str, float]]:
    """($/h, GPUs used) per model by the pool rule in the module docstring."""
    usd: dict[str, float] = defaultdict(float)
    gpus: dict[str, float] = defaultdict(float)
    usage = _pool_gpus_by_model(assignments)
    for pool, cost in _pool_costs(rentals).items():
        users = usage.get(pool, {})
        used = sum(users.values())
        if used <= 0:
            usd[UNATTRIBUTED] += cost
            continue
        for model, model_gpus in users.items():
            usd[model] += cost * model_gpus / used
            gpus[model] += model_gpus
    return dict(usd), dict(gpus)


def model_costs(
    rentals: tuple[RentalRow, ...],
    assignments: tuple[AssignmentRow, ...],
    demand: tuple[DemandRow, ...],
) -> tuple[ModelCost, ...]:
    """Per model: attributed $/h, tokens served per hour and $ per million tokens."""
    usd, gpus = attribute_cost_to_models(rentals, assignments)
    tokens: dict[str, float | None] = {}
    for row in demand:
        row_tokens = row.tokens_per_hr
        previous = tokens.get(row.model, 0.0)
        tokens[row.model] = (
            None if row_tokens is None or previous is None else previous + row_tokens
        )
    result = []
    for model in sorted(set(usd) | set(tokens)):
        model_tokens = tokens.get(model)
        cost = usd.get(model, 0.0)
        per_m = cost / (model_tokens / 1e6) if model_tokens else None
        result.append(ModelCost(model, cost, gpus.get(model, 0.0), model_tokens, per_m))
    return tuple(sorted(result, key=lambda m: (-m.usd_per_hr, m.model)))


def compare_baselines(
    coral_usd_per_hr: float,
    baselines: tuple[PlanRow, ...],
    baseline_rentals: Mapping[str, tuple[RentalRow, ...]],
) -> tuple[BaselineComparison, ...]:
    """Each baseline's $/h as a ratio to Coral's (None when infeasible or Coral costs 0)."""
    rows = []
    for plan in sorted(baselines, key=lambda p: (p.kind, p.plan_id)):
        usd = plan_usd_per_hr(plan, baseline_rentals.get(plan.plan_id, ()))
        if plan.status == "infeasible":
            usd = None
        ratio = usd / coral_usd_per_hr if usd is not None and coral_usd_per_hr > 0 else None
        savings = 1.0 - coral_usd_per_hr / usd if usd else None
        saved = usd - coral_usd_per_hr if usd is not None else None
        rows.append(
            BaselineComparison(plan.plan_id, plan.kind, plan.status, usd, ratio, savings, saved)
        )
    return tuple(rows)


def _latest(runs: Iterable[SimRunRow]) -> SimRunRow | None:
    ordered = sorted(runs, key=lambda r: (r.created_at or datetime.min, r.sim_run_id))
    return ordered[-1] if ordered else None


def sim_summaries(inputs: PlanInputs) -> tuple[SimSummary, ...]:
    """Every simulation of the plan and its baselines, as chart points."""
    kinds = {inputs.plan.plan_id: inputs.plan.kind} | {b.plan_id: b.kind for b in inputs.baselines}
    return tuple(
        SimSummary(
            r.plan_id,
            kinds.get(r.plan_id, "?"),
            r.sim_run_id,
            r.policy,
            r.offered_load_req_per_s,
            r.slo_attainment,
            r.goodput_req_per_s,
        )
        for r in sorted(inputs.sim_runs, key=lambda r: (r.plan_id, r.policy, r.sim_run_id))
    )


def plan_gap(plan: PlanRow) -> float | None:
    """The recorded gap, else (objective − LP bound) / |objective| when both are known."""
    if plan.gap is not None:
        return plan.gap
    if plan.objective is None or plan.lp_bound is None or plan.objective == 0:
        return None
    return (plan.objective - plan.lp_bound) / abs(plan.objective)


def _total_tokens(models: tuple[ModelCost, ...]) -> float | None:
    values = [m.tokens_per_hr for m in models if m.model != UNATTRIBUTED]
    if not values or any(v is None for v in values):
        return None
    return sum(v for v in values if v is not None)


def plan_report(inputs: PlanInputs) -> PlanReport:
    """Compute the whole per-plan report from its inputs."""
    total = plan_usd_per_hr(inputs.plan, inputs.rentals) or 0.0
    lines = tuple(
        line
        for dimension in ("gpu_type", "region", "pricing", "cloud")
        for line in breakdown(inputs.rentals, dimension)
    )
    models = model_costs(inputs.rentals, inputs.assignments, inputs.demand)
    tokens = _total_tokens(models)
    own = _latest(r for r in inputs.sim_runs if r.plan_id == inputs.plan.plan_id)
    return PlanReport(
        plan=inputs.plan,
        total_usd_per_hr=total,
        total_gpus=sum(r.count * r.gpus_per_machine for r in inputs.rentals),
        breakdown=lines,
        pools=pool_costs(inputs.rentals),
        models=models,
        usd_per_million_tokens=total / (tokens / 1e6) if tokens else None,
        tokens_per_hr=tokens,
        baselines=compare_baselines(total, inputs.baselines, inputs.baseline_rentals),
        sims=sim_summaries(inputs),
        slo_attainment=own.slo_attainment if own else None,
        goodput_req_per_s=own.goodput_req_per_s if own else None,
        gap=plan_gap(inputs.plan),
        solve_s=inputs.plan.solve_s,
        snapshot=inputs.snapshot,
        stale=inputs.plan.stale,
        snapshot_age_s=inputs.plan.snapshot_age_s,
    )
