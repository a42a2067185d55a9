"""Candidate templates for a fast first plan: the LP relaxation's choice plus, per model and
phase, the few templates that are cheapest for that model's whole demand.

The LP relaxation picks the templates with the best $ per unit of capacity, which are often large
(a 4-GPU pipeline) and wasteful for a model that needs a fraction of one. The integer-aware
ranking rents whole instances: `ceil(need / capacity) x GPUs x cheapest $/GPU-h` for GPUs in
machines big enough for each stage. The MILP restricted to these candidates is small and solves
in a fraction of the full MILP's time; its plan is then the full MILP's first incumbent. This is
a heuristic for the *start* only: the full template set is still searched and bounded.
"""

from __future__ import annotations

import math
from collections import defaultdict

from planning.domain import Offer, Phase, Template
from planning.placement.milp import BuiltModel, capacity, eligible_templates, max_need
from planning.placement.problem import PlacementProblem

LP_SUPPORT_EPS = 1e-7


def candidate_ids(problem: PlacementProblem, relaxed: BuiltModel, k: int) -> frozenset[str]:
    """Templates the solved LP relaxation uses, plus the `k` cheapest per model and phase."""
    support = {
        tid for (tid, _loc, _c), var in relaxed.x.items() if (var.value() or 0) > LP_SUPPORT_EPS
    }
    prices = usd_per_gpu_hr_by_stage(problem.offers)
    demands = {d.model: d for d in problem.demands}
    for model, templates in eligible_templates(problem).items():
        for phase in Phase:
            need = max_need(demands[model], phase, problem.headroom)
            ranked = sorted(
                (t for t in templates if t.phase == phase and capacity(t) > 0),
                key=lambda t: _whole_instance_usd_per_hr(t, need, prices),
            )
            support.update(t.template_id for t in ranked[:k])
    return frozenset(support)


def usd_per_gpu_hr_by_stage(offers: tuple[Offer, ...]) -> dict[tuple[str, int], float]:
    """(GPU type, stage size) -> the cheapest $/GPU-h among offered machines that hold the stage."""
    prices: dict[tuple[str, int], float] = defaultdict(lambda: math.inf)
    for o in offers:
        if o.available_count > 0:
            per_gpu = o.price_usd_per_hr / o.gpu_count
            for tp in range(1, o.gpu_count + 1):
                prices[(o.gpu_type, tp)] = min(prices[(o.gpu_type, tp)], per_gpu)
    return prices


def _whole_instance_usd_per_hr(
    t: Template, need: float, prices: dict[tuple[str, int], float]
) -> float:
    per_instance = sum(s.tp * prices.get((s.gpu_type, s.tp), math.inf) for s in t.stages)
    return math.ceil(need / capacity(t)) * per_instance if need > 0 else per_instance
