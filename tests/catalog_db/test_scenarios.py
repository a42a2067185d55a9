"""The bundled scenario suite loads, matches its stated situations, and bad files are named."""

from __future__ import annotations

from pathlib import Path

import pytest

from catalog_db.scenarios import (
    ScenarioError,
    load_scenario,
    scenario_names,
    to_problem,
    trace_token_means,
)
from planning.domain import Phase, Pricing
from planning.placement.problem import Mode
from tests.planning.placement.factories import template


def test_suite_has_the_five_situations() -> None:
    assert [n[0] for n in scenario_names()] == ["a", "b", "c", "d", "e"]


def test_zipf46_has_46_models_20_gpu_types_4_regions_and_no_dominant_model() -> None:
    s = load_scenario("d")
    assert len(s.demands) == 46
    assert len({o.gpu_type for o in s.offers}) >= 20
    assert len({(o.cloud, o.region) for o in s.offers}) == 4
    total = sum(d.rate_req_per_s for d in s.demands)
    assert max(d.rate_req_per_s for d in s.demands) / total < 0.25
    assert total == pytest.approx(300)


def test_demand_tokens_come_from_the_azure_traces() -> None:
    s = load_scenario("a")
    conv_in, conv_out = trace_token_means("conv")
    assert 1000 < conv_in < 1300 and 150 < conv_out < 260  # SOURCE.md: 1,155 / 211
    chat = next(d for d in s.demands if d.workload_class == "chat")
    assert (chat.mean_input_tokens, chat.mean_output_tokens) == (conv_in, conv_out)


def test_spot_scenario_prices_spot_at_the_factor() -> None:
    s = load_scenario("c_spot_heavy")
    od = {
        (o.region, o.instance_type): o.price_usd_per_hr
        for o in s.offers
        if o.pricing == Pricing.ON_DEMAND
    }
    for o in (o for o in s.offers if o.pricing == Pricing.SPOT):
        assert o.price_usd_per_hr == pytest.approx(0.3 * od[(o.region, o.instance_type)])
    assert s.max_spot_share == 0.7


def test_variants_get_their_base_templates() -> None:
    s = load_scenario("d")
    base = s.variants[0][1]
    problem = to_problem(
        s, (template("t1", base, Phase.COLOCATED, (("L4", 1),), 1.0, workload_class="chat"),)
    )
    assert {t.model for t in problem.templates} >= {base, s.variants[0][0]}
    assert problem.mode == Mode.COST


def test_overload_is_goodput_mode() -> None:
    assert load_scenario("e").mode == Mode.GOODPUT


def test_unknown_scenario_lists_the_known_ones() -> None:
    with pytest.raises(ScenarioError, match="known: a_abundant_mixed"):
        load_scenario("zzz")


@pytest.mark.parametrize(
    ("text", "field"),
    [
        (
            "demand: {total_req_per_s: -1, models: [{model: m, trace: conv}]}",
            "demand.total_req_per_s",
        ),
        (
            "demand: {total_req_per_s: 1, models: [{model: m, trace: nope}]}",
            "demand.models.0.trace",
        ),
    ],
)
def test_bad_file_names_file_and_field(tmp_path: Path, text: str, field: str) -> None:
    path = tmp_path / "bad.yaml"
    inventory = "inventory: {regions: [aws/r], gpu_types: [L4], default: {on_demand: 1}}"
    path.write_text(f"name: bad\ndescription: x\n{text}\n{inventory}\n", encoding="utf-8")
    with pytest.raises(ScenarioError, match=f"bad.yaml: field {field}"):
        load_scenario(path)


def test_unpriced_gpu_type_is_named(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(
        "name: x\ndescription: x\ndemand: {total_req_per_s: 1, models: [{model: m, trace: conv}]}\n"
        "inventory: {regions: [aws/r], gpu_types: [TPUv9], default: {on_demand: 1}}\n",
        encoding="utf-8",
    )
    with pytest.raises(ScenarioError, match="no price for 'TPUv9'"):
        load_scenario(path)
