"""The placement problem as one frozen value: templates, inventory offers, demand and knobs.

Bad input (negative or NaN rates, a headroom below zero, a spot share outside [0, 1], two demands
for one model) raises `PlacementInputError` at construction, before anything is solved. Inputs
that are well formed but cannot be served (no template for a model, an SLO no template meets, an
empty inventory) are not errors: the solver returns an infeasible plan that says why.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import StrEnum

from planning.domain import ModelDemand, Offer, Phase, Pricing, Template


class PlacementInputError(ValueError):
    """The problem is malformed (the message names the field and the offending value)."""


class Mode(StrEnum):
    """COST: serve all demand at minimum $/h. GOODPUT: serve as much weighted demand as the
    inventory allows, then at minimum $/h."""

    COST = "cost"
    GOODPUT = "goodput"


class SolverName(StrEnum):
    CBC = "cbc"
    HIGHS = "highs"


@dataclass(frozen=True, slots=True)
class Slot:
    """Where template instances run: one template in one cloud region at one pricing class."""

    template_id: str
    cloud: str
    region: str
    pricing: Pricing


@dataclass(frozen=True, slots=True)
class Churn:
    """The current deployment and how much changing it costs.

    `penalty_usd_per_hr_per_change` is added to the objective per template instance added or
    removed (a $/h equivalent of the disruption); `max_changes` is a hard cap on that count.
    """

    previous: tuple[tuple[Slot, int], ...]
    penalty_usd_per_hr_per_change: float = 0.0
    max_changes: int | None = None


@dataclass(frozen=True, slots=True)
class PlacementProblem:
    """Everything the MILP needs; see `planning.placement.milp` for the formulation.

    `headroom` is the capacity margin over demand (0.1 = provision 110 %). `max_spot_share`
    bounds each model's share of GPUs on spot. `budget_usd_per_hr` caps the rental bill.
    `mip_gap`: the solver stops once its incumbent is proven within this relative distance of
    its best bound (status OPTIMAL then means optimal within `mip_gap`; 0 asks for exact).
    `start_candidates`: K > 0 first solves the MILP over a few candidate templates (those the LP
    relaxation uses plus, per model and phase, the K cheapest for that model's demand at the
    cheapest offered $/GPU-h) and hands that plan to the full MILP as its first incumbent, which
    then runs for the time left (see `planning.placement.candidates`); the full template set is
    always searched and bounded. None: the full MILP alone.
    """

    templates: tuple[Template, ...]
    offers: tuple[Offer, ...]
    demands: tuple[ModelDemand, ...]
    headroom: float = 0.1
    mode: Mode = Mode.COST
    max_spot_share: float | None = None
    budget_usd_per_hr: float | None = None
    churn: Churn | None = None
    solver: SolverName = SolverName.CBC
    time_limit_s: float = 30.0
    mip_gap: float = 0.005
    start_candidates: int | None = 3
    name: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        for demand in self.demands:
            _check_demand(demand)
        for offer in self.offers:
            _check_offer(offer)
        for template in self.templates:
            _check_template(template)
        models = [d.model for d in self.demands]
        if len(set(models)) != len(models):
            raise PlacementInputError("demands: a model appears more than once")
        _check_knobs(self)


def _finite_nonneg(value: float, what: str) -> None:
    if not isinstance(value, int | float) or math.isnan(value) or math.isinf(value) or value < 0:
        raise PlacementInputError(f"{what} must be a finite number >= 0, got {value!r}")


def _check_demand(d: ModelDemand) -> None:
    _finite_nonneg(d.rate_req_per_s, f"demand {d.model}: rate_req_per_s")
    _finite_nonneg(d.priority, f"demand {d.model}: priority")
    for name in ("mean_input_tokens", "mean_output_tokens", "ttft_slo_s", "tpot_slo_s"):
        value = getattr(d, name)
        _finite_nonneg(value, f"demand {d.model}: {name}")
        if value == 0:
            raise PlacementInputError(f"demand {d.model}: {name} must be > 0")


def _check_offer(o: Offer) -> None:
    where = f"offer {o.cloud}/{o.region}/{o.instance_type}/{o.pricing}"
    _finite_nonneg(o.price_usd_per_hr, f"{where}: price_usd_per_hr")
    if o.gpu_count <= 0 or o.available_count < 0:
        raise PlacementInputError(f"{where}: gpu_count must be > 0 and available_count >= 0")


def _check_template(t: Template) -> None:
    value = t.throughput_req_per_s if t.phase == Phase.COLOCATED else t.throughput_tokens_per_s
    unit = "throughput_req_per_s" if t.phase == Phase.COLOCATED else "throughput_tokens_per_s"
    if value is None:
        raise PlacementInputError(f"template {t.template_id} ({t.phase}): {unit} is missing")
    _finite_nonneg(value, f"template {t.template_id}: {unit}")
    if not t.stages:
        raise PlacementInputError(f"template {t.template_id}: no stages")


def _check_knobs(p: PlacementProblem) -> None:
    _finite_nonneg(p.headroom, "headroom")
    if p.max_spot_share is not None and not 0.0 <= p.max_spot_share <= 1.0:
        raise PlacementInputError(f"max_spot_share must lie in [0, 1], got {p.max_spot_share}")
    if p.budget_usd_per_hr is not None:
        _finite_nonneg(p.budget_usd_per_hr, "budget_usd_per_hr")
    if not 0.0 <= p.mip_gap < 1.0:
        raise PlacementInputError(f"mip_gap must lie in [0, 1), got {p.mip_gap}")
    if p.start_candidates is not None and p.start_candidates < 1:
        raise PlacementInputError(
            f"start_candidates must be >= 1 or None, got {p.start_candidates}"
        )
    if not p.time_limit_s > 0:
        raise PlacementInputError(f"time_limit_s must be > 0, got {p.time_limit_s}")
    if p.churn is not None:
        _finite_nonneg(p.churn.penalty_usd_per_hr_per_change, "churn penalty")
        if p.churn.max_changes is not None and p.churn.max_changes < 0:
            raise PlacementInputError("churn max_changes must be >= 0")
