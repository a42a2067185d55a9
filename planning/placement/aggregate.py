"""Interchangeable locations merged into one, and the merged plan split back.

Two locations are *interchangeable* when they offer the same instance types (GPU type, GPUs per
machine, pricing class, price); only how many machines each has may differ. Demand is not tied
to a location (C1 sums over them), so the MILP cannot tell such locations apart, and branch and
bound wastes its time on plans that differ only by a permutation of them (scenario (d)'s four
regions at one price list: see BENCHMARKS.md, "Placement", before and after this module).

`aggregate(problem)` replaces each group by its first location, with machine counts summed. This
is a *relaxation*: any plan of the original problem, its counts summed per group, is a plan of
the merged one at the same cost. So the merged optimum (and the MIP's dual bound and the LP bound)
bound the original from below (cost) or above (served demand), and the LP relaxations are equal
(an LP plan of the merged problem splits across the group in proportion to machine counts).

`disaggregation(problem, groups, counts, served)` is the original problem restricted to the
templates the merged plan uses, with the merged plan's instance counts per template and pricing
class as totals over each group (`totals` constraints). Solved for cost, it finds where each
instance runs; if it reaches the merged cost the split plan is optimal for the original problem
too. When the per-location machine counts make those totals impossible the caller drops them
(`drop_totals`) and solves the restricted problem freely.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, replace

import pulp

from planning.domain import Offer, Pricing
from planning.placement.milp import BuiltModel, Location, XKey, build
from planning.placement.plan import DemandSplit, Plan, Rental
from planning.placement.problem import Mode, PlacementProblem

TOTALS_PREFIX = "AGG_total_"
# The split stops once within this gap of its own bound: it only places a plan that is already
# chosen, and the plan's reported gap is measured against the merged problem's bound anyway.
SPLIT_MIP_GAP = 0.02


@dataclass(frozen=True, slots=True)
class LocationGroups:
    """Each location's representative (the first of its group, in sorted order)."""

    representative: dict[Location, Location]

    @property
    def merges(self) -> bool:
        """Whether any two locations were merged."""
        return len(set(self.representative.values())) < len(self.representative)


def location_groups(offers: tuple[Offer, ...]) -> LocationGroups:
    """Group locations whose available offers have the same types and prices."""
    signature: dict[Location, set[tuple]] = defaultdict(set)
    for o in offers:
        if o.available_count > 0:
            signature[_where(o)].add(
                (o.instance_type, o.gpu_type, o.gpu_count, str(o.pricing), o.price_usd_per_hr)
            )
    first: dict[frozenset, Location] = {}
    rep: dict[Location, Location] = {}
    for loc in sorted(signature):
        rep[loc] = first.setdefault(frozenset(signature[loc]), loc)
    return LocationGroups(rep)


def aggregate(problem: PlacementProblem, groups: LocationGroups) -> PlacementProblem:
    """The merged problem: one location per group, machine counts summed (see module doc)."""
    totals: dict[tuple[Location, str, Pricing], int] = defaultdict(int)
    for o in problem.offers:
        if _where(o) in groups.representative and o.available_count > 0:
            rep = groups.representative[_where(o)]
            totals[(rep, o.instance_type, o.pricing)] += o.available_count
    offers = tuple(
        replace(o, available_count=totals[(_where(o), o.instance_type, o.pricing)])
        for o in problem.offers
        if o.available_count > 0 and groups.representative.get(_where(o)) == _where(o)
    )
    return replace(problem, offers=offers, name=f"{problem.name} (locations merged)")


def merged_counts(built: BuiltModel) -> dict[XKey, int]:
    """Instance counts of a solved merged model, per (template, representative, pricing)."""
    return {key: n for key, var in built.x.items() if (n := round(var.value() or 0.0)) > 0}


def merged_rentals(built: BuiltModel) -> dict[tuple[Location, str, Pricing], int]:
    """Machines a solved merged model rents, per (representative, instance type, pricing)."""
    out: dict[tuple[Location, str, Pricing], int] = {}
    for i, var in built.y.items():
        if (n := round(var.value() or 0.0)) > 0:
            o = built.problem.offers[i]
            out[(_where(o), o.instance_type, o.pricing)] = n
    return out


def fill_in_order(
    problem: PlacementProblem,
    groups: LocationGroups,
    rentals: dict[tuple[Location, str, Pricing], int],
) -> dict[int, int]:
    """Offer index -> machines: each merged rental filled into its group's locations in order,
    each up to its availability. Filling every instance type in the same order keeps the GPU
    types a model uses together in the first locations, and removes the split's symmetry."""
    left = dict(rentals)
    fixed: dict[int, int] = {}
    for i in sorted(range(len(problem.offers)), key=lambda i: _where(problem.offers[i])):
        o = problem.offers[i]
        key = (groups.representative.get(_where(o), _where(o)), o.instance_type, o.pricing)
        take = min(left.get(key, 0), o.available_count)
        if take > 0:
            fixed[i] = take
            left[key] -= take
    return fixed


def _where(o: Offer) -> Location:
    return (o.cloud, o.region)


def disaggregation(
    problem: PlacementProblem,
    groups: LocationGroups,
    counts: dict[XKey, int],
    served: dict[str, float],
    machines: dict[int, int] | None = None,
) -> BuiltModel:
    """The original problem over the merged plan's templates, each model's demand scaled to the
    fraction the merged plan serves, cost mode, with the merged counts as per-group totals.
    `machines` (offer index -> count, see `fill_in_order`) fixes the rented machines too (as
    `totals` constraints, dropped with them)."""
    used = {tid for tid, _loc, _c in counts}
    demands = tuple(
        replace(d, rate_req_per_s=d.rate_req_per_s * served.get(d.model, 1.0))
        for d in problem.demands
    )
    restricted = replace(
        problem,
        templates=tuple(t for t in problem.templates if t.template_id in used),
        demands=demands,
        mode=Mode.COST,
        start_candidates=None,
        mip_gap=max(problem.mip_gap, SPLIT_MIP_GAP),
    )
    built = build(restricted)
    by_total: dict[XKey, list[pulp.LpVariable]] = defaultdict(list)
    for (tid, loc, c), var in built.x.items():
        by_total[(tid, groups.representative[loc], c)].append(var)
    for i, (key, n) in enumerate(sorted(counts.items())):
        built.lp += pulp.lpSum(by_total.get(key, [])) == n, f"{TOTALS_PREFIX}{i}"
    if machines is not None:
        for i, var in built.y.items():
            built.lp += var == machines.get(i, 0), f"{TOTALS_PREFIX}y{i}"
    return built


def drop_totals(built: BuiltModel) -> None:
    """Remove the per-group totals: the restricted problem is then solved freely."""
    for name in [n for n in built.lp.constraints if n.startswith(TOTALS_PREFIX)]:
        del built.lp.constraints[name]


def merge_plan(plan: Plan | None, groups: LocationGroups) -> Plan | None:
    """A plan of the original locations as a plan of the merged ones (counts summed)."""
    if plan is None:
        return None

    def rep(cloud: str, region: str) -> Location:
        return groups.representative.get((cloud, region), (cloud, region))

    rentals: dict[tuple, Rental] = {}
    for r in plan.rentals:
        cloud, region = rep(r.cloud, r.region)
        key = (cloud, region, r.instance_type, r.pricing)
        old = rentals.get(key)
        rentals[key] = replace(
            r, cloud=cloud, region=region, count=r.count + (old.count if old else 0)
        )
    splits: dict[tuple, DemandSplit] = {}
    for s in plan.demand_splits:
        cloud, region = rep(s.cloud, s.region)
        old = splits.get((s.model, cloud, region))
        pd, co = (old.pd_rate_req_per_s, old.coloc_rate_req_per_s) if old else (0.0, 0.0)
        splits[(s.model, cloud, region)] = replace(
            s,
            cloud=cloud,
            region=region,
            pd_rate_req_per_s=s.pd_rate_req_per_s + pd,
            coloc_rate_req_per_s=s.coloc_rate_req_per_s + co,
        )
    assignments = tuple(
        replace(a, cloud=rep(a.cloud, a.region)[0], region=rep(a.cloud, a.region)[1])
        for a in plan.assignments
    )
    return replace(
        plan,
        assignments=assignments,
        rentals=tuple(rentals.values()),
        demand_splits=tuple(splits.values()),
    )
