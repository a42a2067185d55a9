"""The pruning is lossless: min-cost MILP over all rated templates = over the kept ones.

Small instances (2 models, 4 GPU types, synthetic roofline profiles), random prices,
inventories and demands (hypothesis). The MILP is written here (PuLP, CBC), independent of
planning.placement:
  min sum_g price_g * sum_t x_t n_tg
  s.t. per model m: d_m + e_m = rate_m                          (P/D or colocated)
       sum_{t prefill of m} x_t cap_t >= d_m * input_tokens
       sum_{t decode of m}  x_t cap_t >= d_m * output_tokens
       sum_{t colocated of m} x_t cap_t >= e_m                   (requests/s)
       sum_t x_t n_tg <= inventory_g                             for every GPU type g
       x_t in Z>=0, d_m, e_m >= 0
"""

from __future__ import annotations

import itertools
from functools import cache

import pulp
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from planning.domain import Phase, Template
from planning.perf_table import build_tables
from planning.templates.build import TemplateBuild, build_templates
from planning.templates.params import PipelineSpace, TemplateParams
from tests.planning.templates import synthetic as syn

CLASS = syn.CHAT
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")  # PULP_CBC_CMD


@cache
def world(uniform_tp: bool, space: PipelineSpace = PipelineSpace.MINIMAL) -> TemplateBuild:
    tables = build_tables(syn.profile_points(syn.WORLD_MODELS, syn.WORLD_GPUS))
    params = TemplateParams(uniform_tp=uniform_tp, max_gpu_types_per_pipeline=4, pipelines=space)
    return build_templates(syn.WORLD_MODELS, syn.WORLD_GPUS, [CLASS], tables, params)


def solve(
    templates: tuple[Template, ...],
    prices: dict[str, float],
    inventory: dict[str, int],
    rates: dict[str, float],
) -> float | None:
    """Optimal $/h, or None when infeasible."""
    prob = pulp.LpProblem("lossless", pulp.LpMinimize)
    x = {t.template_id: pulp.LpVariable(f"x_{t.template_id}", 0, cat="Integer") for t in templates}
    gpus = {
        g: pulp.lpSum(x[t.template_id] * t.gpu_vector.get(g, 0) for t in templates) for g in prices
    }
    prob += pulp.lpSum(prices[g] * gpus[g] for g in prices)
    for model, rate in rates.items():
        d = pulp.LpVariable(f"d_{len(prob.constraints)}", 0)
        e = pulp.LpVariable(f"e_{len(prob.constraints)}", 0)
        prob += d + e == rate
        mine = [t for t in templates if t.model == model]
        for phase, need in (
            (Phase.PREFILL, d * CLASS.input_tokens),
            (Phase.DECODE, d * CLASS.output_tokens),
        ):
            cap = [x[t.template_id] * t.throughput_tokens_per_s for t in mine if t.phase is phase]
            prob += pulp.lpSum(cap) >= need
        coloc = [
            x[t.template_id] * t.throughput_req_per_s for t in mine if t.phase is Phase.COLOCATED
        ]
        prob += pulp.lpSum(coloc) >= e
    for g, limit in inventory.items():
        prob += gpus[g] <= limit
    status = prob.solve(pulp.PULP_CBC_CMD(msg=False, gapRel=0, timeLimit=60))
    if pulp.LpStatus[status] == "Infeasible":
        return None
    assert pulp.LpStatus[status] == "Optimal"
    return float(pulp.value(prob.objective) or 0.0)


def test_world_has_something_to_prune() -> None:
    for uniform, space in itertools.product((True, False), PipelineSpace):
        build = world(uniform, space)
        assert build.kept < len(build.rated)
        assert any(len(t.stages) > 1 for t in build.templates)
        assert any(len(t.gpu_vector) > 1 for t in build.rated)


names = [g.gpu_type for g in syn.WORLD_GPUS]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    uniform=st.booleans(),
    space=st.sampled_from(list(PipelineSpace)),
    prices=st.lists(st.floats(0.2, 10.0), min_size=4, max_size=4),
    inventory=st.lists(st.integers(0, 12), min_size=4, max_size=4),
    rates=st.lists(st.floats(0.1, 20.0), min_size=2, max_size=2),
)
def test_min_cost_over_kept_equals_over_all(
    uniform: bool,
    space: PipelineSpace,
    prices: list[float],
    inventory: list[int],
    rates: list[float],
) -> None:
    build = world(uniform, space)
    args = (
        dict(zip(names, prices, strict=True)),
        dict(zip(names, inventory, strict=True)),
        {m.model: r for m, r in zip(syn.WORLD_MODELS, rates, strict=True)},
    )
    every = solve(build.rated, *args)
    kept = solve(build.templates, *args)
    if every is None:
        assert kept is None
    else:
        assert kept == pytest.approx(every, rel=1e-6, abs=1e-6)
