"""Rendering plans into vLLM units: golden files plus the rules vLLM imposes."""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path

import pytest

from catalog_db.connection import read_connection
from catalog_db.deploy_io import load_render_input
from deploy.render.inputs import RenderInput
from deploy.render.render_plan import RenderError, render_deployment
from deploy.render.units import unit_name
from deploy.router.config import RouterConfig
from planning.domain import Stage
from planning.routing.fluidpd_params import FluidPDParams
from tests.deploy import plan_rows

GOLDEN = Path(__file__).parent / "golden"


def _load(db: Path, plan_id: str) -> RenderInput:
    with read_connection(db) as con:
        return load_render_input(con, plan_id)


def _golden(name: str, data: dict) -> None:
    path = GOLDEN / f"{name}.json"
    text = json.dumps(data, indent=2, sort_keys=True) + "\n"
    if os.environ.get("CORAL_UPDATE_GOLDEN"):
        path.write_text(text)
    assert text == path.read_text(), f"{path} differs; CORAL_UPDATE_GOLDEN=1 to rewrite"


def _args(engine_dict: dict) -> dict[str, str]:
    cmd = engine_dict["command"][3:]
    return dict(zip(cmd[::2], cmd[1::2], strict=True))


def test_pd_pair_golden(catalog_path: Path) -> None:
    plan_rows.insert_pd_pair(catalog_path)
    spec = render_deployment(_load(catalog_path, "plan-pd")).to_dict()
    _golden("pd_pair", spec)
    roles = {e["role"]: _args(e) for e in spec["engines"]}
    # FluidRole on: single-stage P/D instances are kv_both so the router can flip them.
    for args in roles.values():
        assert json.loads(args["--kv-transfer-config"]) == {
            "kv_connector": "NixlConnector", "kv_role": "kv_both"}  # fmt: skip
    assert roles["decode"]["--max-num-seqs"] == "96"
    assert "--long-prefill-token-threshold" in roles["decode"]  # FluidToken on decode
    (router,) = spec["routers"]
    assert [i["role"] for i in router["instances"]] == ["decode", "prefill"]


def test_mixed_pipeline_golden(catalog_path: Path) -> None:
    plan_rows.insert_mixed_pipeline(catalog_path)
    spec = render_deployment(_load(catalog_path, "plan-mixed")).to_dict()
    _golden("mixed_pipeline", spec)
    prefill = next(e for e in spec["engines"] if e["role"] == "prefill")
    assert prefill["env"]["VLLM_PP_LAYER_PARTITION"] == "44,36"
    assert prefill["multi_machine"] is True
    assert [(s["instance_type"], s["tp"]) for s in prefill["stages"]] == [
        ("p5.48xlarge", 2), ("p4de.24xlarge", 2)]  # fmt: skip
    args = _args(prefill)
    assert (args["--tensor-parallel-size"], args["--pipeline-parallel-size"]) == ("2", "2")
    # PP on the prefill side: the whole group uses the push connector, fixed roles.
    for engine in spec["engines"]:
        config = json.loads(_args(engine)["--kv-transfer-config"])
        assert config["kv_connector"] == "NixlPushConnector"
        assert config["kv_role"] in ("kv_producer", "kv_consumer")


def test_single_gpu_decode_golden(catalog_path: Path) -> None:
    plan_rows.insert_single_gpu_decode(catalog_path)
    spec = render_deployment(_load(catalog_path, "plan-l4"), FluidPDParams.static()).to_dict()
    _golden("single_gpu_decode", spec)
    decodes = [e for e in spec["engines"] if e["role"] == "decode"]
    assert len(decodes) == 2 and len({e["unit_id"] for e in decodes}) == 2
    for engine in decodes:
        # the tightest rented machine: g6.xlarge (1 L4), not g6.12xlarge
        assert [s["instance_type"] for s in engine["stages"]] == ["g6.xlarge"]
        args = _args(engine)
        assert args["--tensor-parallel-size"] == "1"
        assert json.loads(args["--kv-transfer-config"])["kv_role"] == "kv_consumer"
        assert "--long-prefill-token-threshold" not in args  # static params: no FluidToken
        assert "VLLM_PP_LAYER_PARTITION" not in engine["env"]


@pytest.mark.parametrize("insert", [plan_rows.insert_pd_pair, plan_rows.insert_mixed_pipeline])
def test_router_config_is_what_the_router_accepts(catalog_path: Path, insert) -> None:  # type: ignore[no-untyped-def]
    insert(catalog_path)
    plan_id = "plan-pd" if insert is plan_rows.insert_pd_pair else "plan-mixed"
    for router in render_deployment(_load(catalog_path, plan_id)).routers:
        config = RouterConfig.model_validate(router.config())
        assert config.params() == FluidPDParams()
        assert len(config.instances) == len(router.instances)


def test_colocated_only_group_gets_a_router(catalog_path: Path) -> None:
    plan_rows.insert_colocated(catalog_path)
    spec = render_deployment(_load(catalog_path, "plan-colo"))
    assert len(spec.engines) == 2 and all(e.kv_role is None for e in spec.engines)
    (router,) = spec.routers
    config = RouterConfig.model_validate(router.config())
    assert [i.role for i in config.instances] == ["colocated", "colocated"]
    assert [i.id for i in config.instances] == [unit_name(e.unit_id) for e in spec.engines]


def _with_stages(data: RenderInput, template_id: str, stages, partition) -> RenderInput:  # type: ignore[no-untyped-def]
    specs = tuple(
        replace(s, template=replace(s.template, stages=stages), pp_layer_partition=partition)
        if s.template.template_id == template_id
        else s
        for s in data.templates
    )
    return replace(data, templates=specs)


def test_bad_templates_are_refused(catalog_path: Path) -> None:
    plan_rows.insert_mixed_pipeline(catalog_path)
    data = _load(catalog_path, "plan-mixed")
    pre, dec = plan_rows.MIXED_PREFILL.template_id, plan_rows.MIXED_DECODE.template_id
    two = (Stage("H100-SXM", 2, 44), Stage("A100-SXM-80GB", 2, 36))
    with pytest.raises(RenderError, match="no pp_layer_partition"):
        render_deployment(_with_stages(data, pre, two, None))
    with pytest.raises(RenderError, match="one layer count per stage"):
        render_deployment(_with_stages(data, pre, two, "80"))
    with pytest.raises(RenderError, match="disagrees"):
        render_deployment(_with_stages(data, pre, two, "40,40"))
    uneven_tp = (Stage("H100-SXM", 4, 44), Stage("A100-SXM-80GB", 2, 36))
    with pytest.raises(RenderError, match="different TP"):
        render_deployment(_with_stages(data, pre, uneven_tp, "44,36"))
    with pytest.raises(RenderError, match="decode with pipeline parallelism"):
        render_deployment(_with_stages(data, dec, two, "44,36"))
    no_a100 = replace(data, rentals=tuple(r for r in data.rentals if r.gpu_type != "A100-SXM-80GB"))
    with pytest.raises(RenderError, match="rents no on_demand machine"):
        render_deployment(no_a100)
