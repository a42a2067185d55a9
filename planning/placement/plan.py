"""The result of a placement solve: frozen values, one shape for Coral and every baseline."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from enum import StrEnum

from planning.domain import Phase, Pricing


class PlanStatus(StrEnum):
    """OPTIMAL: proven optimal. FEASIBLE: a solution, optimality not proven (time limit).
    INFEASIBLE: no plan meets the constraints; `Plan.explanation` says what binds."""

    OPTIMAL = "optimal"
    FEASIBLE = "feasible"
    INFEASIBLE = "infeasible"


class PlanKind(StrEnum):
    CORAL = "coral"
    HOMOGENEOUS = "homogeneous"
    MELANGE = "melange"
    HOMOGENEOUS_PD = "homogeneous_pd"


@dataclass(frozen=True, slots=True)
class Assignment:
    """`count` instances of one template in one region at one pricing class."""

    template_id: str
    model: str
    phase: Phase
    cloud: str
    region: str
    pricing: Pricing
    count: int
    gpus: tuple[tuple[str, int], ...]  # GPUs per type of ONE instance


@dataclass(frozen=True, slots=True)
class Rental:
    """`count` machines of one instance type; `price_usd_per_hr` is per machine."""

    cloud: str
    region: str
    instance_type: str
    pricing: Pricing
    gpu_type: str
    gpu_count: int
    count: int
    price_usd_per_hr: float


@dataclass(frozen=True, slots=True)
class DemandSplit:
    """How one model's served demand is routed in one region (req/s)."""

    model: str
    cloud: str
    region: str
    pd_rate_req_per_s: float
    coloc_rate_req_per_s: float


@dataclass(frozen=True, slots=True)
class ModelService:
    """Demand of one model and the fraction of it the plan serves (1.0 in cost mode)."""

    model: str
    demand_req_per_s: float
    served_fraction: float
    priority: float


@dataclass(frozen=True, slots=True)
class Plan:
    """A placement plan. `objective` is the primary objective: $/h (plus churn penalty) in cost
    mode, priority-weighted served req/s in goodput mode. `lp_bound` bounds that objective by the
    root LP relaxation (weak: it rents fractions of machines). `best_bound` is the best proven
    bound: the larger (cost mode; the smaller in goodput mode) of `lp_bound` and the MIP solver's
    dual bound (HiGHS `mip_dual_bound`; CBC: the objective less `mip_gap` when proven optimal).
    `gap` = |objective - best_bound| / |objective|, i.e. the gap to the BEST bound, not to the LP
    relaxation. Both bounds hold for every plan over the problem's full template set and
    inventory (a merged-locations solve bounds the original: see `planning.placement.aggregate`)."""

    kind: PlanKind
    mode: str
    solver: str
    status: PlanStatus
    objective: float | None
    cost_usd_per_hr: float | None
    lp_bound: float | None
    gap: float | None
    solve_s: float
    assignments: tuple[Assignment, ...]
    rentals: tuple[Rental, ...]
    demand_splits: tuple[DemandSplit, ...]
    services: tuple[ModelService, ...]
    churn_changes: int = 0
    explanation: str | None = None
    best_bound: float | None = None

    @property
    def feasible(self) -> bool:
        return self.status is not PlanStatus.INFEASIBLE

    @property
    def served_fraction(self) -> float:
        """Demand-weighted served fraction over all models (1.0 when nothing is demanded)."""
        total = sum(s.demand_req_per_s for s in self.services)
        if total == 0:
            return 1.0 if self.feasible else 0.0
        return sum(s.demand_req_per_s * s.served_fraction for s in self.services) / total

    @property
    def served_req_per_s(self) -> float:
        return sum(s.demand_req_per_s * s.served_fraction for s in self.services)

    def gpus_by_type(self) -> dict[str, int]:
        """GPUs in use by template instances, per GPU type."""
        totals: dict[str, int] = defaultdict(int)
        for a in self.assignments:
            for gpu_type, n in a.gpus:
                totals[gpu_type] += n * a.count
        return dict(totals)

    def cost_by_model_usd_per_hr(self) -> dict[str, float]:
        """Rental cost attributed to models by the GPUs their instances use, at the mean price
        per GPU of the machines rented in that region, pricing class and GPU type. Rented GPUs
        no instance uses are attributed to the key "(idle)"."""
        price: dict[tuple[str, str, Pricing, str], list[float]] = defaultdict(lambda: [0.0, 0.0])
        for r in self.rentals:
            acc = price[(r.cloud, r.region, r.pricing, r.gpu_type)]
            acc[0] += r.count * r.price_usd_per_hr
            acc[1] += r.count * r.gpu_count
        costs: dict[str, float] = defaultdict(float)
        used: dict[tuple[str, str, Pricing, str], float] = defaultdict(float)
        for a in self.assignments:
            for gpu_type, n in a.gpus:
                key = (a.cloud, a.region, a.pricing, gpu_type)
                usd, gpus = price[key]
                costs[a.model] += a.count * n * usd / gpus if gpus else 0.0
                used[key] += a.count * n
        idle = sum(usd * (1 - used[k] / gpus) for k, (usd, gpus) in price.items() if gpus)
        if idle > 1e-9:
            costs["(idle)"] = idle
        return dict(costs)
