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

Splitting back (`solve._split`): the merged plan's instances are cut into pieces (a model's
P and D instances together, each colocated instance alone) and `piece_model`, a small MILP,
puts each piece whole in one location of its group, renting the cheapest machines that hold
them; then, with time left, every instance is a piece (routing each model's demand over its
pieces), started from the first placement (`instance_start`, completed with `fix_pieces`), so
it ends no worse. `disaggregation(problem, groups, counts, served)`, the original problem
restricted to the merged plan's templates with its counts as per-group totals, is then solved
with the instances fixed where the pieces went (`fix_instances`: only machines and routing are
left), and improved from there with the time left (`solve._improve`: its `extra` templates may
then be used too). Where no placement of whole pieces exists (a P/D piece bigger than any one
location), the disaggregation is searched from scratch, and without the totals (`drop_totals`)
if those cannot be met. A split that reaches the merged cost is optimal.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, replace

import pulp

from planning.domain import ModelDemand, Offer, Phase, Pricing, Template
from planning.placement.milp import (
    BuiltModel,
    Location,
    XKey,
    build,
    capacity_rows,
    clipped_capacity,
    linear,
)
from planning.placement.plan import DemandSplit, Plan, Rental
from planning.placement.problem import Mode, PlacementProblem

TOTALS_PREFIX = "AGG_total_"
FIXED_PREFIX = "AGG_fixed_"
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


@dataclass(slots=True)
class PieceModel:
    """Where each piece of a merged plan goes (`piece_model`): a small PuLP MILP."""

    lp: pulp.LpProblem
    pieces: list[tuple[Location, list[tuple[XKey, int]]]]
    at: dict[tuple[int, Location], pulp.LpVariable]  # piece i at location: binary
    members: dict[Location, list[Location]]  # the locations of each group, by representative
    ordered: frozenset[Location]  # groups (representatives) under symmetry breaking


def piece_model(
    problem: PlacementProblem,
    groups: LocationGroups,
    counts: dict[XKey, int],
    served: dict[str, float],
    *,
    whole_pd: bool,
) -> PieceModel:
    """The merged instance counts as pieces to put in the locations of their group, each piece
    whole in one, renting the cheapest machines that hold them (C4 per location, by GPU type,
    pricing and stage size; C5). `whole_pd`: a model's P and D instances are one piece (they
    carry its P/D demand wherever they go) and each colocated instance is one: few pieces, fast,
    but a big P/D piece may leave machines half used. Otherwise every instance is a piece and
    each model's demand (its `served` share) is routed as in C1-C3c over the locations its
    pieces went to. Pieces are sorted by GPUs; where a group's locations are identical
    (availability too), piece i may only use the group's first i + 1 locations: any plan has a
    permutation of locations of that form, so this only removes symmetry."""
    templates = {t.template_id: t for t in problem.templates}
    split = _pieces(counts, templates) if whole_pd else _instances(counts)
    pieces = sorted(split, key=lambda p: (-_gpus(p[1], templates), p[1]))
    members = _members(groups)
    lp = pulp.LpProblem("coral_split", pulp.LpMinimize)
    at: dict[tuple[int, Location], pulp.LpVariable] = {}
    ordered = frozenset(rep for rep in members if _identical(problem.offers, members[rep]))
    for i, (rep, _items) in enumerate(pieces):
        where = members[rep][: i + 1] if rep in ordered else members[rep]
        for loc in where:
            at[(i, loc)] = pulp.LpVariable(f"a{i}_{len(at)}", cat=pulp.LpBinary)
        lp += pulp.lpSum(at[(i, loc)] for loc in where) == 1, f"piece_{i}"
    model = PieceModel(lp, pieces, at, members, ordered)
    _add_machines(model, problem, templates)
    if not whole_pd:
        _add_routing(model, problem, templates, served)
    return model


def _add_machines(
    model: PieceModel, problem: PlacementProblem, templates: dict[str, Template]
) -> None:
    """Machines rented (C5 bounds) and the pieces' GPUs in them (C4); cost as objective."""
    sizes = _stage_sizes(model.pieces, templates)
    offers = problem.offers
    y = {
        i: pulp.LpVariable(f"y{i}", 0, o.available_count, cat=pulp.LpInteger)
        for i, o in enumerate(offers)
        if o.available_count > 0 and (o.pricing, o.gpu_type) in sizes
    }
    model.lp += linear((v, offers[i].price_usd_per_hr) for i, v in y.items())
    needs = [_gpu_need(items, templates, sizes) for _rep, items in model.pieces]
    for loc in sorted({loc for _i, loc in model.at}):
        for (c, g), ks in sizes.items():
            machines = [
                i
                for i in y
                if (_where(offers[i]), offers[i].pricing, offers[i].gpu_type) == (loc, c, g)
            ]
            for k in ks:
                held = [
                    (model.at[(i, loc)], need[(c, g, k)])
                    for i, need in enumerate(needs)
                    if (i, loc) in model.at and need.get((c, g, k))
                ]
                room = [(y[i], offers[i].gpu_count) for i in machines if offers[i].gpu_count >= k]
                if held:
                    model.lp += linear(held) <= linear(room), f"C4_{len(model.lp.constraints)}"


def _add_routing(
    model: PieceModel,
    problem: PlacementProblem,
    templates: dict[str, Template],
    served: dict[str, float],
) -> None:
    """C1-C3c over the pieces (`milp.capacity_rows`, capacities clipped as there): per model and
    location, the req/s its pieces there can serve; each model's served req/s all routed."""
    demands = {d.model: d for d in _served_demands(problem, served)}
    caps: dict[tuple[str, Location], dict[Phase, list]] = defaultdict(lambda: defaultdict(list))
    for (i, loc), var in model.at.items():
        ((tid, _rep, _c), _n) = model.pieces[i][1][0]
        t = templates[tid]
        cap = clipped_capacity(t, demands[t.model], problem.headroom)
        caps[(t.model, loc)][t.phase].append((var, cap))
    routed: dict[str, list[pulp.LpVariable]] = defaultdict(list)
    for n, ((name, _loc), by_phase) in enumerate(caps.items()):
        tag = f"piece{n}"
        names = (f"d_{tag}", f"e_{tag}")
        rows = capacity_rows(model.lp, demands[name], by_phase, problem.headroom, tag, names)
        routed[name] += [v for v in rows if v is not None]
    for n, (name, parts) in enumerate(routed.items()):
        model.lp += pulp.lpSum(parts) == demands[name].rate_req_per_s, f"C1_{n}"


def placed_counts(model: PieceModel) -> dict[XKey, int]:
    """Instance counts per real location from a solved `piece_model`."""
    placed: dict[XKey, int] = defaultdict(int)
    for (i, loc), var in model.at.items():
        if (var.value() or 0.0) > 0.5:
            for (tid, _rep, c), n in model.pieces[i][1]:
                placed[(tid, loc, c)] += n
    return dict(placed)


def instance_start(model: PieceModel, placed: dict[XKey, int]) -> dict[int, Location]:
    """A location for each piece of an every-instance `model` that puts the instances where
    `placed` (another placement of the same counts) has them. In a symmetry-broken group the
    locations are relabelled in order of first use, so piece i gets one of the group's first
    i + 1 locations (at most i were used before it), as `piece_model` requires; such a group's
    locations are identical, so relabelling changes no cost."""
    left = dict(placed)
    label: dict[Location, Location] = {}
    used: dict[Location, int] = defaultdict(int)  # labels handed out, per representative
    start: dict[int, Location] = {}
    for i, (rep, items) in enumerate(model.pieces):
        ((tid, _rep, c), _n) = items[0]
        loc = next(loc for loc in model.members[rep] if left.get((tid, loc, c), 0) > 0)
        left[(tid, loc, c)] -= 1
        if rep in model.ordered and loc not in label:
            label[loc] = model.members[rep][used[rep]]
            used[rep] += 1
        start[i] = label.get(loc, loc)
    return start


def fix_pieces(model: PieceModel, start: dict[int, Location]) -> None:
    """Fix each piece to its location in `start` (to complete a start: machines and routing)."""
    for (i, loc), var in model.at.items():
        var.lowBound = var.upBound = 1 if start.get(i) == loc else 0


def free_pieces(model: PieceModel) -> None:
    """Undo `fix_pieces`."""
    for var in model.at.values():
        var.lowBound, var.upBound = 0, 1


def _pieces(
    counts: dict[XKey, int], templates: dict[str, Template]
) -> list[tuple[Location, list[tuple[XKey, int]]]]:
    """What is placed whole: per model and group, its prefill and decode instances together
    (P and D of a request share a location), and each colocated instance alone (any share of a
    model's colocated demand can be served anywhere)."""
    pd: dict[tuple[str, Location], list[tuple[XKey, int]]] = defaultdict(list)
    pieces: list[tuple[Location, list[tuple[XKey, int]]]] = []
    for key, n in sorted(counts.items()):
        t = templates[key[0]]
        if t.phase == Phase.COLOCATED:
            pieces.extend((key[1], [(key, 1)]) for _ in range(n))
        else:
            pd[(t.model, key[1])].append((key, n))
    return pieces + [(rep, items) for (_model, rep), items in pd.items()]


def _instances(counts: dict[XKey, int]) -> list[tuple[Location, list[tuple[XKey, int]]]]:
    """Every instance a piece of its own."""
    return [(key[1], [(key, 1)]) for key, n in sorted(counts.items()) for _ in range(n)]


def _members(groups: LocationGroups) -> dict[Location, list[Location]]:
    """The locations of each group, by representative, in sorted order."""
    members: dict[Location, list[Location]] = defaultdict(list)
    for loc in sorted(groups.representative):
        members[groups.representative[loc]].append(loc)
    return members


def _identical(offers: tuple[Offer, ...], locations: list[Location]) -> bool:
    """Whether the locations offer the same machines in the same numbers."""
    stock: dict[Location, set[tuple]] = defaultdict(set)
    for o in offers:
        if _where(o) in locations and o.available_count > 0:
            stock[_where(o)].add((o.instance_type, o.pricing, o.available_count))
    return len({frozenset(v) for v in stock.values()}) <= 1


def _stage_sizes(
    pieces: list[tuple[Location, list[tuple[XKey, int]]]], templates: dict[str, Template]
) -> dict[tuple[Pricing, str], list[int]]:
    """The stage sizes (C4's k) used per (pricing, GPU type)."""
    sizes: dict[tuple[Pricing, str], set[int]] = defaultdict(set)
    for _rep, items in pieces:
        for (tid, _loc, c), _n in items:
            for s in templates[tid].stages:
                sizes[(c, s.gpu_type)].add(s.tp)
    return {key: sorted(ks) for key, ks in sizes.items()}


def _gpu_need(
    items: list[tuple[XKey, int]],
    templates: dict[str, Template],
    sizes: dict[tuple[Pricing, str], list[int]],
) -> dict[tuple[Pricing, str, int], int]:
    """GPUs per (pricing, GPU type, k) in stages of at least k GPUs (C4's left-hand side)."""
    need: dict[tuple[Pricing, str, int], int] = defaultdict(int)
    for (tid, _loc, c), n in items:
        for s in templates[tid].stages:
            for k in sizes[(c, s.gpu_type)]:
                if s.tp >= k:
                    need[(c, s.gpu_type, k)] += n * s.tp
    return need


def _gpus(items: list[tuple[XKey, int]], templates: dict[str, Template]) -> int:
    return sum(n * templates[tid].total_gpus for (tid, _loc, _c), n in items)


def _where(o: Offer) -> Location:
    return (o.cloud, o.region)


def disaggregation(
    problem: PlacementProblem,
    groups: LocationGroups,
    counts: dict[XKey, int],
    served: dict[str, float],
    extra: frozenset[str] = frozenset(),
) -> BuiltModel:
    """The original problem over the merged plan's templates and the `extra` ones, each model's
    demand scaled to the fraction the merged plan serves, cost mode, with the merged counts as
    per-group totals (0 for templates the plan does not use: `drop_totals` frees them)."""
    used = {tid for tid, _loc, _c in counts} | extra
    demands = _served_demands(problem, served)
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
    for i, key in enumerate(sorted(set(counts) | set(by_total))):
        built.lp += pulp.lpSum(by_total.get(key, [])) == counts.get(key, 0), f"{TOTALS_PREFIX}{i}"
    return built


def _served_demands(problem: PlacementProblem, served: dict[str, float]) -> tuple[ModelDemand, ...]:
    """Each model's demand scaled to the fraction the merged plan serves."""
    return tuple(
        replace(d, rate_req_per_s=d.rate_req_per_s * served.get(d.model, 1.0))
        for d in problem.demands
    )


def fix_instances(built: BuiltModel, placed: dict[XKey, int]) -> None:
    """Fix every instance count to `placed` (0 where absent; see `piece_model`): what is left to
    solve is which machines to rent and where demand goes, an easy problem."""
    for i, (key, var) in enumerate(built.x.items()):
        built.lp += var == placed.get(key, 0), f"{FIXED_PREFIX}{i}"


def drop_fixed(built: BuiltModel) -> None:
    """Undo `fix_instances`."""
    _drop(built, FIXED_PREFIX)


def drop_totals(built: BuiltModel) -> None:
    """Remove the per-group totals: the restricted problem is then solved freely."""
    _drop(built, TOTALS_PREFIX)


def _drop(built: BuiltModel, prefix: str) -> None:
    for name in [n for n in built.lp.constraints if n.startswith(prefix)]:
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
        prior = splits.get((s.model, cloud, region))
        pd, co = (prior.pd_rate_req_per_s, prior.coloc_rate_req_per_s) if prior else (0.0, 0.0)
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
