"""Merging interchangeable locations (an exact relaxation) and splitting the plan back, the
candidate-template start, and the capacity clipping that tightens the LP bound."""

from __future__ import annotations

import time
from collections import Counter, defaultdict
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from planning.domain import Phase, Pricing
from planning.placement import aggregate as aggregate_module
from planning.placement import solve as solve_module
from planning.placement.aggregate import aggregate, location_groups
from planning.placement.candidates import candidate_ids
from planning.placement.milp import build, capacity
from planning.placement.plan import Plan, PlanStatus
from planning.placement.problem import Churn, PlacementProblem
from planning.placement.solve import run, solve, solve_core
from tests.planning.placement.factories import demand, offer, small_problems, template

P, D, C = Phase.PREFILL, Phase.DECODE, Phase.COLOCATED
# relative slack for the solvers' feasibility tolerance (seen: a split 2.6009091 req/s needing
# 2,861.00001 tok/s of prefill against 2,861 installed)
SOLVER_TOL = 1e-6


def _twin_regions(problem: PlacementProblem, available: tuple[int, ...]) -> PlacementProblem:
    """`problem` with region r1's price list copied to more regions, availability per region."""
    r1 = [o for o in problem.offers if o.region == "r1"]
    offers = tuple(
        replace(o, region=f"r{i + 1}", available_count=n)
        for i, n in enumerate(available)
        for o in r1
    )
    return replace(problem, offers=offers)


def test_location_groups_merge_only_identical_price_lists() -> None:
    offers = (
        offer("A", 1, 1.0, 3, "r1"),
        offer("A", 1, 1.0, 9, "r2"),  # same price list, other availability: same group
        offer("A", 1, 1.5, 3, "r3"),  # another price: its own group
    )
    groups = location_groups(offers)
    assert groups.representative == {
        ("aws", "r1"): ("aws", "r1"),
        ("aws", "r2"): ("aws", "r1"),
        ("aws", "r3"): ("aws", "r3"),
    }
    merged = aggregate(PlacementProblem((), offers, ()), groups)
    assert {(o.region, o.available_count) for o in merged.offers} == {("r1", 12), ("r3", 3)}


def test_demand_beyond_one_region_splits_with_pd_together(monkeypatch: pytest.MonkeyPatch) -> None:
    # 3 P + 3 D one-GPU instances are needed; each region has 4 one-GPU machines. The merged
    # problem rents 6; the split must put each request's P and D in one region.
    templates = (
        template("p", "m", P, (("A", 1),), 1_000),
        template("d", "m", D, (("A", 1),), 200),
    )
    problem = PlacementProblem(
        templates,
        (offer("A", 1, 1.0, 4, "r1"), offer("A", 1, 1.0, 4, "r2")),
        (demand("m", 3.0),),
        headroom=0.0,
        mip_gap=0.0,
    )
    placements = _spy_placements(monkeypatch)
    plan = solve(problem)
    # P and D whole (6 machines) fit in no region; placed one instance at a time, each region
    # gets as many P as D instances (here 1 req/s each), so each serves its own requests
    (placed,) = placements
    assert placed is not None
    per_region = defaultdict(lambda: defaultdict(int))
    for (tid, loc, _c), n in placed.items():
        per_region[loc][tid] += n
    assert {loc[1]: (c["p"], c["d"]) for loc, c in per_region.items()} in (
        {"r1": (1, 1), "r2": (2, 2)},
        {"r1": (2, 2), "r2": (1, 1)},
    )
    assert plan.status == PlanStatus.OPTIMAL
    assert plan.cost_usd_per_hr == pytest.approx(6.0)
    assert {r.region for r in plan.rentals} == {"r1", "r2"}
    _assert_feasible(problem, plan)


def _spy_placements(monkeypatch: pytest.MonkeyPatch) -> list[dict | None]:
    """Record what `solve._place` returns."""
    seen: list[dict | None] = []
    real = solve_module._place

    def spy(*args: object) -> dict | None:
        seen.append(real(*args))  # type: ignore[arg-type]
        return seen[-1]

    monkeypatch.setattr(solve_module, "_place", spy)
    return seen


def test_pieces_keep_prefill_and_decode_together_and_colocated_instances_apart() -> None:
    templates = {
        t.template_id: t
        for t in (
            template("p", "m", P, (("A", 1),), 1_000),
            template("d", "m", D, (("A", 2),), 500),
            template("c", "m", C, (("A", 1),), 1.0),
        )
    }
    rep, od = ("aws", "r1"), Pricing.ON_DEMAND
    counts = {("p", rep, od): 2, ("d", rep, od): 1, ("c", rep, od): 3}
    pieces = aggregate_module._pieces(counts, templates)
    assert sorted(len(items) for _rep, items in pieces) == [1, 1, 1, 2]
    together = next(items for _rep, items in pieces if len(items) == 2)
    assert sorted(together) == [(("d", rep, od), 1), (("p", rep, od), 2)]
    assert [items for _rep, items in pieces if len(items) == 1] == [[(("c", rep, od), 1)]] * 3


@pytest.mark.parametrize(("available", "places"), [((2, 2, 2), [1, 2, 3]), ((2, 3, 2), [3, 3, 3])])
def test_piece_model_breaks_symmetry_only_between_identical_locations(
    available: tuple[int, ...], places: list[int]
) -> None:
    # piece i may only use the first i + 1 of identical locations (any plan can be relabelled so)
    base = PlacementProblem(
        (template("c", "m", C, (("A", 1),), 1.0),), (offer("A", 1, 1.0, 1),), (demand("m", 3.0),)
    )
    problem = _twin_regions(base, available)
    groups = location_groups(problem.offers)
    counts = {("c", ("aws", "r1"), Pricing.ON_DEMAND): 3}
    model = aggregate_module.piece_model(problem, groups, counts, {}, whole_pd=True)
    assert [sum(1 for (i, _loc) in model.at if i == piece) for piece in range(3)] == places


def test_split_places_pieces_whole_where_machines_are_cheapest(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # 4 one-GPU replicas; each region has one 4-GPU machine ($3) and one 1-GPU machine ($1).
    # Merged, one 4-GPU machine holds all ($3); split 2 + 2 over the regions would cost $6 or
    # $4 (two 1-GPU machines each side); the pieces must all go to one region.
    templates = (template("c", "m", C, (("A", 1),), 1.0),)
    offers = (offer("A", 4, 3.0, 1, "r1"), offer("A", 1, 1.0, 1, "r1"))
    base = PlacementProblem(templates, offers, (demand("m", 4.0),), headroom=0.0, mip_gap=0.0)
    problem = _twin_regions(base, (1, 1))
    placements = _spy_placements(monkeypatch)
    plan = solve(problem)
    assert len(placements) == 1 and placements[0] is not None
    assert {(loc, n) for (_t, loc, _c), n in placements[0].items()} == {(("aws", "r1"), 4)}
    assert plan.status == PlanStatus.OPTIMAL
    assert plan.cost_usd_per_hr == pytest.approx(3.0)
    assert {(a.region, a.count) for a in plan.assignments} == {("r1", 4)}
    _assert_feasible(problem, plan)


def test_merged_solve_is_bounded_by_and_close_to_the_unmerged_optimum() -> None:
    templates = (
        template("p", "m", P, (("A", 1),), 1_000),
        template("d", "m", D, (("A", 2),), 500),
        template("c", "m", C, (("B", 1),), 1.0),
    )
    offers = (offer("A", 4, 4.0, 1, "r1"), offer("B", 1, 1.5, 2, "r1"))
    problem = _twin_regions(PlacementProblem(templates, offers, (demand("m", 5.0),)), (1, 2))
    merged = solve(problem)
    apart = solve_core(problem, merge=False)
    optimum = apart.outcome.objective
    assert optimum is not None
    assert merged.best_bound is not None and merged.best_bound <= optimum + 1e-6
    assert merged.cost_usd_per_hr == pytest.approx(optimum, rel=problem.mip_gap + 1e-9)
    _assert_feasible(problem, merged)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problem=small_problems(), available=st.tuples(st.integers(0, 4), st.integers(0, 4)))
def test_law_merged_plans_are_feasible_and_never_beat_the_optimum(
    problem: PlacementProblem, available: tuple[int, int]
) -> None:
    problem = _twin_regions(problem, available)
    apart = solve_core(problem, merge=False).outcome
    plan = solve(problem)
    if apart.status is PlanStatus.INFEASIBLE:
        return  # the merged solve may or may not find one; nothing to compare
    assert plan.feasible
    assert plan.cost_usd_per_hr >= (apart.objective or 0) - 1e-6
    assert plan.best_bound is not None and plan.best_bound <= (apart.objective or 0) + 1e-6
    _assert_feasible(problem, plan)


def test_candidates_add_the_cheapest_whole_instance_the_lp_ignores() -> None:
    # 1 req/s + 10 % = 1.1 req/s. Per req/s the LP prefers "x" ($1 for 1.0) over "y" ($1.2 for
    # 1.1), so its support is {x}; rented whole, x needs 2 ($2) and y 1 ($1.2): y must be added.
    templates = (
        template("x", "m", C, (("A", 1),), 1.0),
        template("y", "m", C, (("B", 1),), 1.1),
    )
    problem = PlacementProblem(
        templates, (offer("A", 1, 1.0, 4), offer("B", 1, 1.2, 4)), (demand("m", 1.0),)
    )
    relaxed = build(problem, relaxed=True)
    run(relaxed, problem.solver, 10)
    support = {tid for (tid, _l, _c), v in relaxed.x.items() if (v.value() or 0) > 1e-7}
    assert support == {"x"}
    assert candidate_ids(problem, relaxed, 1) == {"x", "y"}
    assert solve(problem).cost_usd_per_hr == pytest.approx(1.2)


def test_capacity_clipping_tightens_the_lp_bound_to_one_whole_instance() -> None:
    # One 10 req/s replica for 1 req/s of demand: unclipped, the LP runs a tenth of it ($0.20);
    # clipped to the demand, the LP must run a whole one: the bound is the optimum, $2.
    problem = PlacementProblem(
        (template("c", "m", C, (("A", 1),), 10.0),),
        (offer("A", 1, 2.0, 3),),
        (demand("m", 1.0),),
        headroom=0.0,
    )
    plan = solve(problem)
    assert plan.lp_bound == pytest.approx(2.0)
    assert plan.cost_usd_per_hr == pytest.approx(2.0)


def _assert_feasible(problem: PlacementProblem, plan: Plan) -> None:
    """Check a plan against the formulation's constraints in the original locations."""
    templates = {t.template_id: t for t in problem.templates}
    offered = {(o.cloud, o.region, o.instance_type, o.pricing): o for o in problem.offers}
    used: dict[tuple, int] = defaultdict(int)
    have: dict[tuple, int] = defaultdict(int)
    for r in plan.rentals:
        assert r.count <= offered[(r.cloud, r.region, r.instance_type, r.pricing)].available_count
        have[(r.cloud, r.region, r.pricing, r.gpu_type)] += r.count * r.gpu_count
    caps: dict[tuple, float] = defaultdict(float)
    for a in plan.assignments:
        t = templates[a.template_id]
        for g, n in t.gpu_vector.items():
            used[(a.cloud, a.region, a.pricing, g)] += n * a.count
        caps[(t.model, a.cloud, a.region, t.phase)] += capacity(t) * a.count
    assert all(n <= have[key] for key, n in used.items())
    grow = (1 + problem.headroom) * (1 - SOLVER_TOL)
    rates = {d.model: d for d in problem.demands}
    for s in plan.demand_splits:
        m = rates[s.model]
        where = (s.model, s.cloud, s.region)
        assert caps[(*where, P)] >= grow * m.mean_input_tokens * s.pd_rate_req_per_s
        assert caps[(*where, D)] >= grow * m.mean_output_tokens * s.pd_rate_req_per_s
        assert caps[(*where, C)] >= grow * s.coloc_rate_req_per_s
    for svc in plan.services:
        routed = sum(
            s.pd_rate_req_per_s + s.coloc_rate_req_per_s
            for s in plan.demand_splits
            if s.model == svc.model
        )
        assert routed == pytest.approx(svc.demand_req_per_s * svc.served_fraction, rel=1e-6)


def test_solve_merges_twin_regions_and_not_under_churn(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    real = aggregate_module.aggregate

    def spy(problem: PlacementProblem, groups: object) -> PlacementProblem:
        calls.append(problem.name)
        return real(problem, groups)  # type: ignore[arg-type]

    monkeypatch.setattr(aggregate_module, "aggregate", spy)
    templates = (template("c", "m", C, (("A", 1),), 1.0),)
    offers = (offer("A", 1, 1.0, 2, "r1"), offer("A", 1, 1.0, 2, "r2"))
    problem = PlacementProblem(templates, offers, (demand("m", 3.0),), headroom=0.0, name="twins")
    plan = solve(problem)
    assert calls == ["twins"]
    assert plan.cost_usd_per_hr == pytest.approx(3.0)
    assert {r.region for r in plan.rentals} == {"r1", "r2"}
    solve(replace(problem, churn=Churn(previous=())))
    assert calls == ["twins"]  # previous slots are per region: no merging with churn


def test_solve_starts_from_the_candidates_only_when_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[int] = []
    real = solve_module.candidate_ids

    def spy(problem: PlacementProblem, relaxed: object, k: int) -> frozenset[str]:
        seen.append(k)
        return real(problem, relaxed, k)  # type: ignore[arg-type]

    monkeypatch.setattr(solve_module, "candidate_ids", spy)
    problem = PlacementProblem(
        (template("c", "m", C, (("A", 1),), 1.0),), (offer("A", 1, 1.0, 4),), (demand("m", 2.0),)
    )
    assert solve(problem).cost_usd_per_hr == pytest.approx(3.0)
    assert seen == [problem.start_candidates]
    solve(replace(problem, start_candidates=None))
    assert seen == [problem.start_candidates]


def _spy_splits(monkeypatch: pytest.MonkeyPatch) -> list[tuple[bool, float | None]]:
    """Record each `solve._split` call's `fallback` flag and the cost it found."""
    calls: list[tuple[bool, float | None]] = []
    real = solve_module._split

    def spy(*args: object, **kwargs: object) -> tuple:
        built, outcome = real(*args, **kwargs)  # type: ignore[arg-type]
        calls.append((bool(kwargs.get("fallback", True)), outcome.objective))
        return built, outcome

    monkeypatch.setattr(solve_module, "_split", spy)
    return calls


def test_cost_mode_splits_the_restricted_plan_first_and_keeps_the_cheaper_split(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # 3 req/s on 2-req/s replicas: the LP rents 1.5 machines, so the restricted MILP's plan is
    # not proven by the LP bound and the full MILP runs. The restricted MILP only sees the
    # dearer template ($2 machines): its plan is split first ($4), then the full MILP's plan,
    # cheaper merged ($2), is split too, and its split kept.
    calls = _spy_splits(monkeypatch)
    monkeypatch.setattr(solve_module, "candidate_ids", lambda *_a: frozenset({"dear"}))
    templates = (
        template("cheap", "m", C, (("A", 1),), 2.0),
        template("dear", "m", C, (("B", 1),), 2.0),
    )
    offers = (offer("A", 1, 1.0, 2), offer("B", 1, 2.0, 2))
    base = PlacementProblem(templates, offers, (demand("m", 3.0),), headroom=0.0)
    problem = _twin_regions(base, (2, 2))
    plan = solve(problem)
    assert [cost for _fallback, cost in calls] == [pytest.approx(4.0), pytest.approx(2.0)]
    assert plan.cost_usd_per_hr == pytest.approx(2.0)
    _assert_feasible(problem, plan)


def test_a_plan_no_cheaper_merged_than_a_split_in_hand_is_not_split(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # As above with one template: the full MILP's plan costs what the restricted plan's split
    # costs ($2), so no split of it can be cheaper and it is not split.
    calls = _spy_splits(monkeypatch)
    templates = (template("c", "m", C, (("A", 1),), 2.0),)
    base = PlacementProblem(templates, (offer("A", 1, 1.0, 2),), (demand("m", 3.0),), headroom=0.0)
    problem = _twin_regions(base, (2, 2))
    plan = solve(problem)
    assert calls == [(False, pytest.approx(2.0))]
    assert plan.cost_usd_per_hr == pytest.approx(2.0)
    _assert_feasible(problem, plan)


def test_split_polish_improves_on_a_bad_placement() -> None:
    # Placed 2 + 2 over the regions, 4 one-GPU replicas need four $1 machines ($4); the polish
    # (from that placement, for the time left) moves all 4 onto one region's 4-GPU box ($3).
    templates = (template("c", "m", C, (("A", 1),), 1.0),)
    offers = tuple(
        offer("A", gpus, price, n, region)
        for region in ("r1", "r2")
        for gpus, price, n in ((4, 3.0, 1), (1, 1.0, 2))
    )
    problem = PlacementProblem(templates, offers, (demand("m", 4.0),), headroom=0.0, mip_gap=0.0)
    groups = location_groups(problem.offers)
    rep, od = ("aws", "r1"), Pricing.ON_DEMAND
    split = aggregate_module.disaggregation(problem, groups, {("c", rep, od): 4}, {})
    aggregate_module.fix_instances(split, {("c", rep, od): 2, ("c", ("aws", "r2"), od): 2})
    fixed = run(split, problem.solver, 10)
    aggregate_module.drop_fixed(split)
    assert fixed.objective == pytest.approx(4.0)
    polished = solve_module._improve(split, fixed, time.perf_counter() + 10, 0.0)
    assert polished.objective == pytest.approx(3.0)


def test_instance_start_relabels_twin_regions_and_keeps_the_placement() -> None:
    # As a start for the every-instance model, whose piece i may only use the first i + 1 twin
    # regions: 3 replicas all in r2 are relabelled to r1; 2 in r2 and 1 in r1 keep that shape.
    templates = (template("c", "m", C, (("A", 1),), 1.0),)
    base = PlacementProblem(templates, (offer("A", 1, 1.0, 2),), (demand("m", 3.0),), headroom=0.0)
    problem = _twin_regions(base, (3, 3))
    groups = location_groups(problem.offers)
    r1, r2, od = ("aws", "r1"), ("aws", "r2"), Pricing.ON_DEMAND
    model = aggregate_module.piece_model(problem, groups, {("c", r1, od): 3}, {}, whole_pd=False)
    assert list(aggregate_module.instance_start(model, {("c", r2, od): 3}).values()) == [r1] * 3
    placed = {("c", r2, od): 2, ("c", r1, od): 1}
    start = aggregate_module.instance_start(model, placed)
    assert all(loc in model.members[r1][: i + 1] for i, loc in start.items())
    assert sorted(Counter(start.values()).values()) == [1, 2]
    values = solve_module._piece_start(model, placed, problem.solver)
    assert values is not None
    for var in model.lp.variables():
        var.varValue = values.get(var.name, 0.0)
    assert model.lp.valid(1e-6)  # a complete start: machines and routing too
    assert model.lp.objective.value() == pytest.approx(3.0)


def test_split_polish_may_switch_to_the_extra_templates() -> None:
    # The merged plan runs 2 replicas of "dear" ($2 machines); "cheap" ($1 machines) is only
    # among the extra templates (the restricted MILP's candidates): the polish switches to it.
    templates = (
        template("cheap", "m", C, (("A", 1),), 1.0),
        template("dear", "m", C, (("B", 1),), 1.0),
    )
    offers = (offer("A", 1, 1.0, 2), offer("B", 1, 2.0, 2))
    base = PlacementProblem(templates, offers, (demand("m", 2.0),), headroom=0.0, mip_gap=0.0)
    problem = _twin_regions(base, (2, 2))
    groups = location_groups(problem.offers)
    counts = {("dear", ("aws", "r1"), Pricing.ON_DEMAND): 2}
    deadline = time.perf_counter() + 10
    _own, alone = solve_module._split(problem, groups, counts, {}, deadline)
    built, outcome = solve_module._split(
        problem, groups, counts, {}, deadline, extra=frozenset({"cheap"})
    )
    assert (alone.objective, outcome.objective) == (pytest.approx(4.0), pytest.approx(2.0))
    assert {key[0] for key, var in built.x.items() if (var.value() or 0.0) > 0.5} == {"cheap"}


def test_polish_neighbourhoods_free_the_plan_gpu_types_and_location_pairs() -> None:
    templates = (
        template("a", "m", C, (("A", 1),), 1.0),
        template("b", "m", C, (("B", 1),), 1.0),
    )
    offers = (offer("A", 1, 1.0, 2), offer("B", 1, 2.0, 2))
    problem = _twin_regions(PlacementProblem(templates, offers, (demand("m", 2.0),)), (2, 2, 2))
    built = build(problem)
    for (tid, _loc, _c), var in built.x.items():
        var.varValue = 1.0 if tid == "a" else 0.0
    sets = solve_module._neighbourhoods(built)
    od = Pricing.ON_DEMAND
    regions = [("aws", f"r{i}") for i in (1, 2, 3)]
    assert sets[0] == {("a", r, od) for r in regions}  # the templates the plan uses
    assert sets[1:3] == [{(t, r, od) for r in regions} for t in ("a", "b")]  # per GPU type
    assert sets[3:] == [  # per pair of locations
        {(t, r, od) for t in ("a", "b") for r in pair}
        for pair in ((regions[0], regions[1]), (regions[0], regions[2]), (regions[1], regions[2]))
    ]


def test_a_split_searched_from_scratch_is_polished_too(monkeypatch: pytest.MonkeyPatch) -> None:
    # Merged counts of 3 replicas cannot be placed (2 machines in all): the split is searched
    # from scratch without the totals (2 replicas, $2), then handed to the polish.
    polished: list[float | None] = []
    real = solve_module._improve

    def spy(built: object, solved: object, *args: object) -> object:
        polished.append(solved.objective)  # type: ignore[attr-defined]
        return real(built, solved, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(solve_module, "_improve", spy)
    templates = (template("c", "m", C, (("A", 1),), 1.0),)
    base = PlacementProblem(templates, (offer("A", 1, 1.0, 1),), (demand("m", 2.0),), headroom=0.0)
    problem = _twin_regions(base, (1, 1))
    groups = location_groups(problem.offers)
    counts = {("c", ("aws", "r1"), Pricing.ON_DEMAND): 3}
    _built, outcome = solve_module._split(problem, groups, counts, {}, time.perf_counter() + 5)
    assert outcome.objective == pytest.approx(2.0)
    assert polished == [pytest.approx(2.0)]
