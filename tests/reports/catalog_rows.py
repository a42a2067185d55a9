"""Hand-sized plan rows for report tests, inserted into a real catalog.

The constants here are the *inputs*; tests recompute every expected figure from them with plain
arithmetic, never by calling the report code.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path

from catalog_db.connection import write_transaction

PLAN_ID = "plan-coral-1"
PLAN_AT = datetime(2026, 11, 30, 10, 0, 0)
WORKLOAD_ID = "wl-1"
SNAPSHOT_ID = "snap-1"

# (cloud, region, instance_type, pricing, gpu_type, gpus per machine, machines, $/machine-hour)
RENTALS = [
    ("aws", "us-east-1", "p5.48xlarge", "on_demand", "H100-SXM", 8, 2, 98.32),
    ("aws", "us-east-1", "g6e.xlarge", "spot", "L40S", 1, 3, 0.90),
    ("aws", "us-west-2", "p4d.24xlarge", "on_demand", "A100-SXM-40GB", 8, 1, 32.77),
]
# template_id -> (model, phase, {gpu_type: gpus}, write template_gpus rows?)
TEMPLATES = {
    "tA-p": ("org/model-a", "prefill", {"H100-SXM": 4}, True),
    "tA-d": ("org/model-a", "decode", {"H100-SXM": 2}, True),
    "tB-p": ("org/model-b", "prefill", {"H100-SXM": 2}, True),
    "tB-c": ("org/model-b", "colocated", {"L40S": 1}, True),
    "tC-p": ("org/model-c", "prefill", {"A100-SXM-40GB": 4}, False),  # only the stages JSON
}
# (template_id, cloud, region, pricing, count)
ASSIGNMENTS = [
    ("tA-p", "aws", "us-east-1", "on_demand", 2),
    ("tA-d", "aws", "us-east-1", "on_demand", 2),
    ("tB-p", "aws", "us-east-1", "on_demand", 1),
    ("tB-c", "aws", "us-east-1", "spot", 2),
    ("tC-p", "aws", "us-west-2", "on_demand", 2),
]
# (model, region, pd req/s, coloc req/s)
DEMAND = [
    ("org/model-a", "us-east-1", 2.0, 0.0),
    ("org/model-b", "us-east-1", 0.5, 1.5),
    ("org/model-c", "us-west-2", 1.0, 0.0),
]
# model -> (mean input tokens, mean output tokens)
WORKLOAD_TOKENS = {
    "org/model-a": (1000.0, 200.0),
    "org/model-b": (500.0, 100.0),
    "org/model-c": (2000.0, 300.0),
}
# kind -> (status, recorded $/h, rentals)
BASELINES = {
    "homogeneous": ("optimal", 400.0, []),
    "melange": ("optimal", None, [("aws", "us-east-1", "p5.48xlarge", "on_demand", "H100-SXM", 8, 3, 98.32)]),
    "homogeneous_pd": ("infeasible", None, []),
}  # fmt: skip
PLAN_META = {"lp_bound": 220.0, "objective": 232.11, "gap": None, "solve_s": 1.75, "age_s": 420.0}
# (sim_run_id, plan kind or 'coral', policy, created offset s, requests, simulated_s, attainment, goodput)
SIM_RUNS = [
    ("sim-1", "coral", "static", 1, 1000, 100.0, 0.91, 9.1),
    ("sim-2", "coral", "fluidpd", 2, 2000, 100.0, 0.97, 19.4),
    ("sim-3", "coral", "fluidpd", 3, 1000, 100.0, 0.99, 9.9),
    ("sim-4", "homogeneous", "colocated", 4, 1000, 100.0, 0.95, 9.5),
]


def insert_plan(
    con, plan_id: str, kind: str, created_at: datetime, *, status: str = "optimal",
    cost: float | None = None, parent: str | None = None, **extra: object,
) -> None:  # fmt: skip
    con.execute(
        "INSERT INTO plans (plan_id, created_at, kind, parent_plan_id, mode, solver, status, "
        "cost_usd_per_hr, objective, lp_bound, gap, solve_s, snapshot_id, workload_id, stale, "
        "snapshot_age_s) VALUES (?, ?, ?, ?, 'cost', 'cbc', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [
            plan_id, created_at, kind, parent, status, cost, extra.get("objective"),
            extra.get("lp_bound"), extra.get("gap"), extra.get("solve_s"), extra.get("snapshot_id"),
            extra.get("workload_id"), extra.get("stale", False), extra.get("age_s"),
        ],
    )  # fmt: skip


def insert_rental(con, plan_id: str, row: tuple) -> None:
    cloud, region, itype, pricing, gpu, gpus, count, price = row
    con.execute(
        "INSERT INTO plan_rentals VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [plan_id, cloud, region, itype, pricing, gpu, gpus, count, price],
    )


def insert_template(con, template_id: str, model: str, phase: str, gpus: dict[str, int], vector: bool) -> None:  # fmt: skip
    stages = [{"gpu_type": g, "tp": n, "num_layers": 32} for g, n in gpus.items()]
    con.execute(
        "INSERT INTO templates (template_id, template_set_id, model, phase, workload_class, "
        "num_stages, stages, total_gpus, throughput_tokens_per_s, profile_backend, "
        "profile_backend_version) VALUES (?, 'set-1', ?, ?, 'in1024_out256', ?, ?, ?, 1000, "
        "'analytic', 'test')",
        [template_id, model, phase, len(stages), json.dumps(stages), sum(gpus.values())],
    )
    if vector:
        for gpu, n in gpus.items():
            con.execute("INSERT INTO template_gpus VALUES (?, ?, ?)", [template_id, gpu, n])


def insert_assignment(con, plan_id: str, template_id: str, cloud: str, region: str, pricing: str, count: int) -> None:  # fmt: skip
    model, phase, _, _ = TEMPLATES.get(template_id, ("org/model-a", "prefill", {}, False))
    con.execute(
        "INSERT INTO plan_assignments VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        [plan_id, template_id, model, phase, cloud, region, pricing, count],
    )


def insert_sim(con, sim_id: str, plan_id: str, policy: str, created_at: datetime, requests: int, simulated_s: float, attainment: float, goodput: float) -> None:  # fmt: skip
    con.execute(
        "INSERT INTO sim_runs (sim_run_id, plan_id, trace, policy, seed, created_at, simulated_s, "
        "requests, completed, dropped, slo_attainment, goodput_req_per_s) "
        "VALUES (?, ?, 'azure_code', ?, 0, ?, ?, ?, ?, 0, ?, ?)",
        [sim_id, plan_id, policy, created_at, simulated_s, requests, requests, attainment, goodput],
    )


def baseline_id(kind: str) -> str:
    return f"{PLAN_ID}-{kind}"


def seed_plan(db: Path, *, with_sims: bool = True, with_baselines: bool = True) -> None:
    """The plan above, its templates, demand, workload, snapshot, baselines and simulations."""
    with write_transaction(db) as con:
        insert_plan(
            con, PLAN_ID, "coral", PLAN_AT, cost=PLAN_META["objective"],
            objective=PLAN_META["objective"], lp_bound=PLAN_META["lp_bound"],
            solve_s=PLAN_META["solve_s"], snapshot_id=SNAPSHOT_ID, workload_id=WORKLOAD_ID,
            stale=True, age_s=PLAN_META["age_s"],
        )  # fmt: skip
        con.execute(
            "INSERT INTO inventory_snapshots (snapshot_id, source, taken_at, status) "
            "VALUES (?, 'file', ?, 'ok')",
            [SNAPSHOT_ID, PLAN_AT - timedelta(seconds=PLAN_META["age_s"])],
        )
        for row in RENTALS:
            insert_rental(con, PLAN_ID, row)
        for tid, (model, phase, gpus, vector) in TEMPLATES.items():
            insert_template(con, tid, model, phase, gpus, vector)
        for tid, cloud, region, pricing, count in ASSIGNMENTS:
            insert_assignment(con, PLAN_ID, tid, cloud, region, pricing, count)
        for model, region, pd, coloc in DEMAND:
            con.execute(
                "INSERT INTO plan_demand VALUES (?, ?, ?, ?, ?, 1.0)",
                [PLAN_ID, model, region, pd, coloc],
            )
        for model, (tin, tout) in WORKLOAD_TOKENS.items():
            con.execute(
                "INSERT INTO workloads (workload_id, model, rate_req_per_s, mean_input_tokens, "
                "mean_output_tokens, ttft_slo_s, tpot_slo_s, source) "
                "VALUES (?, ?, 1.0, ?, ?, 1.0, 0.05, 'manual')",
                [WORKLOAD_ID, model, tin, tout],
            )
        if with_baselines:
            for kind, (status, cost, rentals) in BASELINES.items():
                insert_plan(
                    con, baseline_id(kind), kind, PLAN_AT, status=status, cost=cost, parent=PLAN_ID
                )
                for row in rentals:
                    insert_rental(con, baseline_id(kind), row)
        if with_sims:
            for sim_id, kind, policy, offset, requests, sim_s, att, goodput in SIM_RUNS:
                plan = PLAN_ID if kind == "coral" else baseline_id(kind)
                at = PLAN_AT + timedelta(seconds=offset)
                insert_sim(con, sim_id, plan, policy, at, requests, sim_s, att, goodput)
