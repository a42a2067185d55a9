"""Storing plans in a real DuckDB catalog: one transaction, deterministic ids, read back; and
`coral plan` end to end on a small scenario with templates written into the catalog."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest
from typer.testing import CliRunner

from catalog_db.plans_io import plan_and_store, read_plan, read_templates, store_plan
from flows.cli.main import app
from planning.domain import Phase
from planning.placement.plan import PlanKind, PlanStatus
from planning.placement.problem import PlacementProblem
from planning.placement.solve import solve
from tests.planning.placement.factories import demand, offer, template

TEMPLATES = (
    template("p-h", "m", Phase.PREFILL, (("H100-SXM", 1),), 10_000, latency_s=0.3),
    template("d-h", "m", Phase.DECODE, (("H100-SXM", 1),), 2_000, latency_s=0.03),
    template("c-l4", "m", Phase.COLOCATED, (("L4", 1),), 1.0, latency_s=0.6),
)
OFFERS = (offer("H100-SXM", 8, 80.0, 2), offer("L4", 1, 0.8, 6))


def _problem(rate: float = 20.0) -> PlacementProblem:
    return PlacementProblem(TEMPLATES, OFFERS, (demand("m", rate),), headroom=0.0)


def _count(db: Path, table: str) -> int:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return int(con.execute(f"SELECT count(*) FROM {table}").fetchone()[0])  # type: ignore[index]
    finally:
        con.close()


def test_store_and_read_back(catalog_path: Path) -> None:
    plan = solve(_problem())
    plan_id = store_plan(catalog_path, plan, demands=_problem().demands)
    back = read_plan(catalog_path, plan_id)
    assert back.status == plan.status and back.cost_usd_per_hr == pytest.approx(
        plan.cost_usd_per_hr
    )
    assert sorted((a.template_id, a.count, a.gpus) for a in back.assignments) == sorted(
        (a.template_id, a.count, a.gpus) for a in plan.assignments
    )
    assert {(r.instance_type, r.count) for r in back.rentals} == {
        (r.instance_type, r.count) for r in plan.rentals
    }
    assert back.served_fraction == pytest.approx(1.0)
    assert _count(catalog_path, "workloads") == 1


def test_rerun_does_not_duplicate(catalog_path: Path) -> None:
    plan = solve(_problem())
    first = store_plan(catalog_path, plan, demands=_problem().demands)
    second = store_plan(catalog_path, plan, demands=_problem().demands)
    assert first == second
    assert _count(catalog_path, "plans") == 1
    assert _count(catalog_path, "plan_assignments") == len(plan.assignments)


def test_failure_inside_the_transaction_stores_nothing(catalog_path: Path) -> None:
    plan = solve(_problem())
    bad_demand = (demand("m", -1.0),)  # violates the workloads CHECK constraint mid-write
    with pytest.raises(duckdb.ConstraintException):
        store_plan(catalog_path, plan, demands=bad_demand)
    for table in ("plans", "plan_assignments", "plan_rentals", "plan_demand", "workloads"):
        assert _count(catalog_path, table) == 0


def test_infeasible_plan_is_stored_with_its_explanation(catalog_path: Path) -> None:
    plan = solve(_problem(rate=10_000))
    plan_id = store_plan(catalog_path, plan, demands=_problem(10_000).demands)
    back = read_plan(catalog_path, plan_id)
    assert back.status == PlanStatus.INFEASIBLE
    assert back.explanation is not None and back.explanation.startswith("inventory binds")


def test_plan_and_store_links_baselines(catalog_path: Path) -> None:
    stored = plan_and_store(catalog_path, _problem())
    kinds = [p.kind for _, p in stored]
    assert kinds == [
        PlanKind.CORAL,
        PlanKind.HOMOGENEOUS,
        PlanKind.MELANGE,
        PlanKind.HOMOGENEOUS_PD,
    ]
    con = duckdb.connect(str(catalog_path), read_only=True)
    parents = con.execute("SELECT kind, parent_plan_id FROM plans ORDER BY kind").fetchall()
    con.close()
    coral_id = stored[0][0]
    assert dict(parents) == {
        "coral": None,
        "homogeneous": coral_id,
        "melange": coral_id,
        "homogeneous_pd": coral_id,
    }


def _write_templates(db: Path) -> None:
    con = duckdb.connect(str(db))
    con.execute("INSERT INTO template_sets (template_set_id, is_current) VALUES ('ts1', true)")
    for t in TEMPLATES:
        stages = json.dumps(
            [{"gpu_type": s.gpu_type, "tp": s.tp, "num_layers": s.num_layers} for s in t.stages]
        )
        con.execute(
            "INSERT INTO templates (template_id, template_set_id, model, phase, workload_class, "
            "num_stages, stages, total_gpus, throughput_tokens_per_s, throughput_req_per_s, "
            "latency_s, profile_backend, profile_backend_version) "
            "VALUES (?, 'ts1', ?, ?, ?, ?, ?, ?, ?, ?, ?, 'hand', '0')",
            [
                t.template_id,
                t.model,
                str(t.phase),
                t.workload_class,
                len(t.stages),
                stages,
                t.total_gpus,
                t.throughput_tokens_per_s,
                t.throughput_req_per_s,
                t.latency_s,
            ],
        )
    con.close()


SCENARIO = """
name: tiny
description: one model, two GPU types
demand:
  total_req_per_s: 20
  models:
    - {model: m, trace: conv}
inventory:
  regions: [aws/us-east-1]
  gpu_types: [H100-SXM, L4]
  default: {on_demand: 4, spot: 0}
"""


def test_cli_plan_scenario_stores_and_prints(catalog_path: Path, tmp_path: Path) -> None:
    _write_templates(catalog_path)
    assert {t.template_id for t in read_templates(catalog_path, ("m",))} == {"p-h", "d-h", "c-l4"}
    path = tmp_path / "tiny.yaml"
    path.write_text(SCENARIO, encoding="utf-8")
    result = CliRunner().invoke(
        app, ["--db", str(catalog_path), "plan", "--scenario", str(path), "-f", "csv"]
    )
    assert result.exit_code == 0, result.output
    assert "optimal" in result.output and "melange" in result.output
    assert _count(catalog_path, "plans") == 4


def test_cli_refuses_mixed_arguments(catalog_path: Path) -> None:
    result = CliRunner().invoke(
        app, ["--db", str(catalog_path), "plan", "--scenario", "a", "--inventory", "snap"]
    )
    assert result.exit_code == 2
    assert "not both" in result.output
    assert _count(catalog_path, "plans") == 0


def test_cli_bad_workload_file_names_line_and_field(catalog_path: Path, tmp_path: Path) -> None:
    path = tmp_path / "w.csv"
    path.write_text(
        "model,rate_req_per_s,mean_input_tokens,mean_output_tokens,ttft_slo_s,"
        "tpot_slo_s\nm,nan,100,10,1,0.05\n",
        encoding="utf-8",
    )
    result = CliRunner().invoke(
        app, ["--db", str(catalog_path), "plan", "--workload", str(path), "--inventory", "snap"]
    )
    assert result.exit_code == 2
    assert "w.csv:2: field rate_req_per_s" in result.output.replace("\n", "")
    assert _count(catalog_path, "plans") == 0


def test_plan_and_store_starts_coral_from_the_best_baseline(
    catalog_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import planning.placement.solve as solve_module

    starts: list[object] = []
    real = solve_module.solve

    def spy(problem: PlacementProblem, kind: PlanKind = PlanKind.CORAL, **kwargs: object):
        if kind is PlanKind.CORAL:
            starts.append(kwargs.get("start"))
        return real(problem, kind, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(solve_module, "solve", spy)
    stored = plan_and_store(catalog_path, _problem())
    coral, baselines = stored[0][1], [p for _, p in stored[1:]]
    (start,) = starts
    assert start is not None and start in baselines  # the cheapest feasible baseline
    assert start.cost_usd_per_hr == min(p.cost_usd_per_hr for p in baselines if p.feasible)
    assert coral.cost_usd_per_hr <= start.cost_usd_per_hr + 1e-6
