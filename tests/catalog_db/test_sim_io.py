"""Plan verification against a real catalog: instances from plan rows, sim_runs row out."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from catalog_db.connection import read_connection, write_transaction
from catalog_db.profiles import upsert_points
from catalog_db.sim_io import read_plan_instances, simulate_plan
from planning.domain import Dtype, Phase, ProfilePoint
from planning.workload import make_trace

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
GPU = "H100-SXM"


def grid(phase: Phase, latency_ms) -> list[ProfilePoint]:  # type: ignore[no-untyped-def]
    return [
        ProfilePoint(
            MODEL, GPU, 1, 32, phase, Dtype.BF16, b, s, latency_ms(b, s), "analytic", "t",
            kv_gib_per_token=128 / 2**20, max_kv_tokens=400_000,
        )
        for b in (1, 64, 256)
        for s in (128, 4096, 16384)
    ]  # fmt: skip


def seed_plan(db: Path, prefill_count: int, decode_count: int) -> None:
    stages = json.dumps([{"gpu_type": GPU, "tp": 1, "num_layers": 32}])
    with write_transaction(db) as con:
        upsert_points(con, grid(Phase.PREFILL, lambda b, s: 10 + 0.05 * b * s / 1000))
        upsert_points(con, grid(Phase.DECODE, lambda b, s: 8 + 0.02 * b))
        for tid, phase, count in (("tp", "prefill", prefill_count), ("td", "decode", decode_count)):
            con.execute(
                "INSERT INTO templates (template_id, template_set_id, model, phase, "
                "workload_class, num_stages, stages, total_gpus, max_batch, ref_cost_usd_per_hr, "
                "profile_backend, profile_backend_version) "
                "VALUES (?, 's', ?, ?, 'chat', 1, ?, 1, 128, 3.0, 'analytic', 't')",
                [tid, MODEL, phase, stages],
            )
            con.execute(
                "INSERT INTO plan_assignments VALUES ('plan1', ?, ?, ?, 'aws', 'us-east-1', "
                "'on_demand', ?)",
                [tid, MODEL, phase, count],
            )
        con.execute(
            "INSERT INTO plans (plan_id, kind, mode, solver, status) "
            "VALUES ('plan1', 'coral', 'cost', 'cbc', 'optimal')"
        )


def test_plan_instances_come_from_assignments_templates_and_profiles(catalog_path: Path) -> None:
    seed_plan(catalog_path, prefill_count=2, decode_count=3)
    with read_connection(catalog_path) as con:
        plan = read_plan_instances(con, "plan1")
    roles = [i.role for i in plan.instances]
    assert sorted(roles) == [Phase.DECODE] * 3 + [Phase.PREFILL] * 2
    assert plan.regions == ("us-east-1",) * 5
    decode = plan.instances[roles.index(Phase.DECODE)].perf
    assert decode.decode_step_s(64, 1000.0) == pytest.approx(0.008 + 0.02 * 64 / 1000)
    assert decode.kv_capacity_tokens == 400_000 and decode.max_batch == 128
    assert decode.kv_bytes_per_token == pytest.approx(128 * 1024)
    assert plan.specs[0].ttft_slo_s == 1.0  # the 'chat' workload class
    with read_connection(catalog_path) as con, pytest.raises(KeyError):
        read_plan_instances(con, "nope")


def test_simulate_plan_stores_a_sim_runs_row(catalog_path: Path) -> None:
    seed_plan(catalog_path, prefill_count=1, decode_count=1)
    trace = make_trace("small", [(i * 0.5, 500, 20) for i in range(40)])
    summary = simulate_plan(catalog_path, "plan1", trace, "static", seed=7)
    assert summary.requests == 40 and summary.completed + summary.dropped == 40
    with read_connection(catalog_path) as con:
        row = con.execute(
            "SELECT plan_id, trace, policy, seed, requests, completed, slo_attainment, cost_usd "
            "FROM sim_runs WHERE sim_run_id = ?",
            [summary.sim_run_id],
        ).fetchone()
    assert row is not None
    assert row[:6] == ("plan1", "small", "static", 7, 40, summary.completed)
    assert row[6] == pytest.approx(summary.slo_attainment)
    # two 1-GPU instances at the template's $3/h, held at least the trace's 19.5 s
    assert row[7] == pytest.approx(3.0 * summary.gpu_hours)
    assert summary.gpu_hours >= 2 * 19.5 / 3600


def test_cli_simulate_prints_and_stores_the_run(catalog_path: Path, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from flows.cli.main import app

    seed_plan(catalog_path, prefill_count=1, decode_count=1)
    csv = tmp_path / "t.csv"
    rows = "".join(f"2023-11-16 18:00:{i:02d}.0000000,300,10\n" for i in range(30))
    csv.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n" + rows, encoding="utf-8")
    runner = CliRunner()
    args = ["--db", str(catalog_path), "simulate", "--plan", "plan1", "--trace", str(csv)]
    result = runner.invoke(app, [*args, "--seed", "3", "-f", "json"])
    assert result.exit_code == 0, result.output
    (printed,) = json.loads(result.stdout)
    assert (printed["requests"], printed["seed"], printed["policy"]) == (30, 3, "static")
    with read_connection(catalog_path) as con:
        assert con.execute("SELECT count(*) FROM sim_runs").fetchone() == (1,)
    missing = runner.invoke(app, ["--db", str(catalog_path), "simulate", "--plan", "nope"])
    assert missing.exit_code == 1 and "nope" in missing.output


def test_two_region_plan_splits_arrivals_by_plan_demand_and_never_crosses(
    catalog_path: Path,
) -> None:
    from collections import Counter

    from planning.routing import make_router
    from planning.simulator import SimConfig, run
    from planning.workload import Workload

    seed_plan(catalog_path, prefill_count=1, decode_count=1)
    with write_transaction(catalog_path) as con:
        for tid, phase, count in (("tp", "prefill", 2), ("td", "decode", 1)):
            con.execute(
                "INSERT INTO plan_assignments VALUES ('plan1', ?, ?, ?, 'aws', 'us-west-2', "
                "'on_demand', ?)",
                [tid, MODEL, phase, count],
            )
        con.execute(
            "INSERT INTO plan_demand VALUES ('plan1', ?, 'us-east-1', 1.5, 0.5, 1.0), "
            "('plan1', ?, 'us-west-2', 6.0, 0.0, 1.0)",
            [MODEL, MODEL],
        )
    with read_connection(catalog_path) as con:
        plan = read_plan_instances(con, "plan1")
    assert sorted(set(plan.regions)) == ["us-east-1", "us-west-2"]
    assert set(plan.clouds) == {"aws"}
    assert plan.region_split == {MODEL: {"us-east-1": 2.0, "us-west-2": 6.0}}
    assert [i.region for i in plan.instances] == list(plan.regions)
    rows = [(i * 0.1, 400 + 10 * (i % 7), 12) for i in range(200)]
    trace = make_trace("small", rows, model=MODEL)
    result = run(
        Workload(trace, plan.specs),
        plan.instances,
        make_router("static"),
        SimConfig(region_split=plan.region_split),
    )
    assert result.completed == 200
    assert Counter(r.region for r in result.per_request) == {"us-east-1": 50, "us-west-2": 150}
    for r in result.per_request:
        assert r.prefill_instance is not None
        assert plan.regions[r.prefill_instance] == plan.regions[r.decode_instance] == r.region
    summary = simulate_plan(catalog_path, "plan1", trace, "fluidpd", seed=1)
    assert summary.completed == 200
    with read_connection(catalog_path) as con:
        row = con.execute(
            "SELECT params FROM sim_runs WHERE sim_run_id = ?", [summary.sim_run_id]
        ).fetchone()
    assert row is not None
    detail = json.loads(row[0])["per_model"][MODEL]
    assert {"queue_p99_s", "prefill_utilisation", "decode_utilisation"} <= set(detail)
    assert json.loads(row[0])["stranded_instances"] == []
    assert detail["slo_attainment"] == pytest.approx(summary.slo_attainment)


def test_prefill_without_a_decode_in_its_region_is_reported_stranded(catalog_path: Path) -> None:
    from catalog_db.sim_io import stranded_instances

    seed_plan(catalog_path, prefill_count=1, decode_count=1)
    with write_transaction(catalog_path) as con:
        con.execute(
            "INSERT INTO plan_assignments VALUES ('plan1', 'tp', ?, 'prefill', 'aws', "
            "'us-west-2', 'on_demand', 1)",
            [MODEL],
        )
    with read_connection(catalog_path) as con:
        plan = read_plan_instances(con, "plan1")
    assert stranded_instances(plan) == ["tp@us-west-2"]
    with write_transaction(catalog_path) as con:  # demand only in us-west-2: us-east-1 idle too
        con.execute(
            "INSERT INTO plan_demand VALUES ('plan1', ?, 'us-west-2', 1.0, 0.0, 1.0)", [MODEL]
        )
    with read_connection(catalog_path) as con:
        plan = read_plan_instances(con, "plan1")
    assert stranded_instances(plan) == ["td@us-east-1", "tp@us-east-1", "tp@us-west-2"]
