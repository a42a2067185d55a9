"""Bad and unservable input: clear errors at construction, or infeasible plans that say why."""

from __future__ import annotations

import math

import pytest

from planning.domain import Phase
from planning.placement.plan import PlanStatus
from planning.placement.problem import Mode, PlacementInputError, PlacementProblem
from planning.placement.solve import solve
from tests.planning.placement.factories import demand, offer, template

TPL = (template("c", "m", Phase.COLOCATED, (("L4", 1),), 1.0, latency_s=0.5),)
OFFERS = (offer("L4", 1, 1.0, 10),)


@pytest.mark.parametrize("rate", [-1.0, math.nan, math.inf])
def test_bad_rate_is_an_error_naming_the_field(rate: float) -> None:
    with pytest.raises(PlacementInputError, match="demand m: rate_req_per_s"):
        PlacementProblem(TPL, OFFERS, (demand("m", rate),))


def test_duplicate_demand_is_an_error() -> None:
    with pytest.raises(PlacementInputError, match="more than once"):
        PlacementProblem(TPL, OFFERS, (demand("m", 1), demand("m", 2)))


def test_unknown_model_is_infeasible_with_its_name() -> None:
    plan = solve(PlacementProblem(TPL, OFFERS, (demand("m", 1), demand("ghost", 1))))
    assert plan.status == PlanStatus.INFEASIBLE
    assert plan.explanation == (
        "model ghost: no templates (unknown model, or templates not built for it)"
    )
    assert plan.assignments == () and plan.rentals == ()


def test_slo_below_every_template() -> None:
    strict = demand("m", 1)
    strict = type(strict)(
        **{**{f: getattr(strict, f) for f in strict.__dataclass_fields__}, "ttft_slo_s": 0.2}
    )
    plan = solve(PlacementProblem(TPL, OFFERS, (strict,)))
    assert plan.status == PlanStatus.INFEASIBLE
    assert "SLO" in (plan.explanation or "") and "0.5" in (plan.explanation or "")


def test_empty_inventory() -> None:
    plan = solve(PlacementProblem(TPL, (), (demand("m", 1),)))
    assert plan.status == PlanStatus.INFEASIBLE
    assert (plan.explanation or "").startswith("empty inventory")


def test_gpu_type_not_offered() -> None:
    plan = solve(PlacementProblem(TPL, (offer("H100", 8, 9.0, 1),), (demand("m", 1),)))
    assert "need GPU types ['L4']" in (plan.explanation or "")


def test_inventory_binds_names_model_gpu_and_region() -> None:
    plan = solve(PlacementProblem(TPL, OFFERS, (demand("m", 50),), headroom=0.0))
    assert plan.status == PlanStatus.INFEASIBLE
    assert plan.explanation == (
        "inventory binds: model m can be served only 20% of 50 req/s "
        "(sold out: L4 in aws/r1 (on_demand, 1-GPU machines))"
    )


def test_goodput_mode_serves_what_it_can_and_notes_the_rest() -> None:
    plan = solve(
        PlacementProblem(
            TPL, OFFERS, (demand("m", 5), demand("ghost", 5)), mode=Mode.GOODPUT, headroom=0.0
        )
    )
    assert plan.status == PlanStatus.OPTIMAL
    assert {s.model: s.served_fraction for s in plan.services} == {"m": 1.0, "ghost": 0.0}
    assert "ghost" in (plan.explanation or "")
