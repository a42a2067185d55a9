"""Test helper: write hand-made plans and templates into a catalog (real DuckDB)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from catalog_db.connection import write_transaction

LLAMA8 = "meta-llama/Llama-3.1-8B-Instruct"
LLAMA70 = "meta-llama/Llama-3.1-70B-Instruct"


@dataclass(frozen=True)
class TemplateRow:
    template_id: str
    model: str
    phase: str
    stages: tuple[tuple[str, int, int], ...]  # (gpu_type, tp, num_layers)
    pp_layer_partition: str | None = None
    throughput_tokens_per_s: float | None = 20000.0
    latency_s: float | None = 0.04
    max_batch: int | None = 64
    workload_class: str = "chat"


@dataclass(frozen=True)
class Assign:
    template_id: str
    count: int
    region: str = "us-east-1"
    pricing: str = "on_demand"
    cloud: str = "aws"


@dataclass(frozen=True)
class Rental:
    instance_type: str
    gpu_type: str
    gpu_count: int
    count: int
    region: str = "us-east-1"
    pricing: str = "on_demand"
    cloud: str = "aws"
    price_usd_per_hr: float = 10.0


def insert_template(con, t: TemplateRow) -> None:  # type: ignore[no-untyped-def]
    stages = [{"gpu_type": g, "tp": tp, "num_layers": n} for g, tp, n in t.stages]
    con.execute(
        "INSERT INTO templates (template_id, template_set_id, model, phase, workload_class, "
        "num_stages, stages, total_gpus, throughput_tokens_per_s, latency_s, max_batch, "
        "pp_layer_partition, profile_backend, profile_backend_version) "
        "VALUES (?, 'ts1', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'analytic', 'test')",
        [
            t.template_id, t.model, t.phase, t.workload_class, len(stages), json.dumps(stages),
            sum(tp for _, tp, _ in t.stages), t.throughput_tokens_per_s, t.latency_s,
            t.max_batch, t.pp_layer_partition,
        ],
    )  # fmt: skip


def insert_plan(
    db: Path,
    plan_id: str,
    templates: list[TemplateRow],
    assignments: list[Assign],
    rentals: list[Rental],
    *,
    status: str = "optimal",
    stale: bool = False,
) -> None:
    with write_transaction(db) as con:
        known = {r[0] for r in con.execute("SELECT template_id FROM templates").fetchall()}
        for t in templates:
            if t.template_id not in known:
                insert_template(con, t)
        con.execute(
            "INSERT INTO plans (plan_id, kind, mode, solver, status, stale, explanation) "
            "VALUES (?, 'coral', 'cost', 'cbc', ?, ?, ?)",
            [plan_id, status, stale, "decode demand of X exceeds inventory" if status ==
             "infeasible" else None],
        )  # fmt: skip
        by_id = {t.template_id: t for t in templates}
        for a in assignments:
            t = by_id[a.template_id]
            con.execute(
                "INSERT INTO plan_assignments VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                [plan_id, a.template_id, t.model, t.phase, a.cloud, a.region, a.pricing, a.count],
            )
        for r in rentals:
            con.execute(
                "INSERT INTO plan_rentals VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [plan_id, r.cloud, r.region, r.instance_type, r.pricing, r.gpu_type,
                 r.gpu_count, r.count, r.price_usd_per_hr],
            )  # fmt: skip


# The three golden scenarios -------------------------------------------------------------

PD_PREFILL = TemplateRow("tpl-l8-p-h100", LLAMA8, "prefill", (("H100-SXM", 1, 32),), max_batch=4)
PD_DECODE = TemplateRow("tpl-l8-d-h100", LLAMA8, "decode", (("H100-SXM", 1, 32),), max_batch=96)
P5 = Rental("p5.48xlarge", "H100-SXM", 8, 1)


def insert_pd_pair(db: Path, plan_id: str = "plan-pd", prefill: int = 1, decode: int = 1) -> None:
    """Llama-3.1-8B: H100 prefill + H100 decode, one p5.48xlarge."""
    insert_plan(
        db, plan_id, [PD_PREFILL, PD_DECODE],
        [Assign(PD_PREFILL.template_id, prefill), Assign(PD_DECODE.template_id, decode)], [P5],
    )  # fmt: skip


MIXED_PREFILL = TemplateRow(
    "tpl-l70-p-h100-a100",
    LLAMA70,
    "prefill",
    (("H100-SXM", 2, 44), ("A100-SXM-80GB", 2, 36)),
    pp_layer_partition="44,36",
    max_batch=2,
)
MIXED_DECODE = TemplateRow("tpl-l70-d-h100", LLAMA70, "decode", (("H100-SXM", 4, 80),))


def insert_mixed_pipeline(db: Path, plan_id: str = "plan-mixed") -> None:
    """Llama-3.1-70B: a prefill pipeline H100×2 (44 layers) → A100×2 (36 layers), H100 decode."""
    insert_plan(
        db, plan_id, [MIXED_PREFILL, MIXED_DECODE],
        [Assign(MIXED_PREFILL.template_id, 1), Assign(MIXED_DECODE.template_id, 1)],
        [P5, Rental("p4de.24xlarge", "A100-SXM-80GB", 8, 1)],
    )  # fmt: skip


SMALL_PREFILL = TemplateRow("tpl-l8-p-l40s", LLAMA8, "prefill", (("L40S", 1, 32),), max_batch=2)
SMALL_DECODE = TemplateRow("tpl-l8-d-l4", LLAMA8, "decode", (("L4", 1, 32),), max_batch=32)


def insert_single_gpu_decode(db: Path, plan_id: str = "plan-l4") -> None:
    """Llama-3.1-8B: one L40S prefill and two single-L4 decode instances (g6.xlarge)."""
    insert_plan(
        db, plan_id, [SMALL_PREFILL, SMALL_DECODE],
        [Assign(SMALL_PREFILL.template_id, 1), Assign(SMALL_DECODE.template_id, 2)],
        [Rental("g6e.xlarge", "L40S", 1, 1), Rental("g6.xlarge", "L4", 1, 2),
         Rental("g6.12xlarge", "L4", 4, 1)],
    )  # fmt: skip


COLOCATED = TemplateRow("tpl-l8-c-h100", LLAMA8, "colocated", (("H100-SXM", 1, 32),))


def insert_colocated(db: Path, plan_id: str = "plan-colo", replicas: int = 2) -> None:
    """Llama-3.1-8B: `replicas` colocated (plain vLLM) H100 instances, no P/D."""
    insert_plan(db, plan_id, [COLOCATED], [Assign(COLOCATED.template_id, replicas)], [P5])
