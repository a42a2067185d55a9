"""Simulator IO: a stored plan's instances as simulator input, and `sim_runs` rows out.

`read_plan_instances` joins `plan_assignments` (template, region, count) with `templates`
(stages JSON, max batch, reference cost) and builds each instance's perf from `profiles`
(via `planning.perf_table.build_tables`) in the model's default dtype:
- prefill latency = the template's stages' prefill tables in pipeline order (issue interval =
  the slowest stage); decode step = its decode tables; a decode template also gets prefill tables
  of the same stage shapes when profiled (for local chunked prefill: colocated, FluidToken);
- KV capacity = the smallest `max_kv_tokens` over stages (every stage holds its layers' KV of
  every token); KV bytes per token = sum over stages of `kv_gib_per_token` x TP, or from the
  model's shape when profiles lack it (GQA: 2 x layers x kv_heads x head_dim x dtype bytes;
  MLA: layers x (kv_lora_rank + qk_rope_head_dim) x dtype bytes);
- $ per hour = the template's `ref_cost_usd_per_hr` (reference on-demand), else its GPUs at
  the `gpu_prices` view's cheapest on-demand $/GPU-hour;
- region and cloud of each instance from its assignment; each model's arrivals are split over
  regions by the plan's per-region demand (`plan_demand`: P/D + colocated req/s), and a request
  is served in the region it arrived in (P and D of one request never cross regions).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb

from catalog_db.connection import read_connection, write_transaction
from catalog_db.profiles import read_points
from catalog_db.queries import model as read_model
from catalog_db.templates_io import parse_stages
from catalog_db.traces import load_trace
from planning.domain import Dtype, ModelArch, Phase, Stage
from planning.perf_table import PerfTable, StageKey, build_tables, table_at_layers
from planning.routing import RouterPolicy, make_router
from planning.routing.base_router import DEFAULT_LINK_GBPS
from planning.routing.instance_perf import ClampCounter, InstancePerf, from_tables
from planning.simulator import SimConfig, SimInstance, SimResult, run
from planning.workload import ModelSpec, Trace, assign_models, percentile

GIB = 2**30


@dataclass(frozen=True, slots=True)
class PlanInstances:
    """A plan's serving instances (one per counted template copy), with demand and SLO hints."""

    plan_id: str
    instances: tuple[SimInstance, ...]
    regions: tuple[str, ...]  # region of each instance
    specs: tuple[ModelSpec, ...]  # per model: SLOs from the plan's workload or template class
    rates_req_per_s: Mapping[str, float]  # per model: the plan's demand (0 if not recorded)
    counter: ClampCounter
    clouds: tuple[str, ...] = ()  # cloud of each instance
    # per model: {region: req/s} from plan_demand; a model without rows has no split
    region_split: Mapping[str, Mapping[str, float]] = field(default_factory=dict)


def read_plan_instances(con: duckdb.DuckDBPyConnection, plan_id: str) -> PlanInstances:
    """Every instance of `plan_id` with its perf built from profiles; KeyError if no such plan."""
    rows = con.execute(
        "SELECT a.template_id, a.model, a.phase, a.region, a.count, t.stages, t.max_batch, "
        "t.ref_cost_usd_per_hr, t.workload_class, a.cloud FROM plan_assignments a "
        "JOIN templates t USING (template_id) WHERE a.plan_id = ? ORDER BY ALL",
        [plan_id],
    ).fetchall()
    if not rows:
        raise KeyError(f"plan {plan_id!r} has no assignments with known templates")
    counter = ClampCounter()
    tables = _tables(con, sorted({r[1] for r in rows}))
    instances: list[SimInstance] = []
    regions: list[str] = []
    clouds: list[str] = []
    for template_id, model, phase, region, count, stages_json, max_batch, cost, _, cloud in rows:
        stages = parse_stages(stages_json)
        arch = read_model(con, model)
        perf = _instance_perf(
            con, f"{template_id}@{region}", arch, Phase(phase), stages, tables,
            max_batch, cost, counter,
        )  # fmt: skip
        instances += [SimInstance(perf, Phase(phase), region, cloud)] * count
        regions += [region] * count
        clouds += [cloud] * count
    return PlanInstances(
        plan_id,
        tuple(instances),
        tuple(regions),
        _specs(con, plan_id, rows),
        _rates(con, plan_id),
        counter,
        tuple(clouds),
        _region_split(con, plan_id),
    )


def _tables(con: duckdb.DuckDBPyConnection, models: Sequence[str]) -> dict[StageKey, PerfTable]:
    points = [p for m in models for p in read_points(con, model=m)]
    return build_tables(points)


def _instance_perf(
    con: duckdb.DuckDBPyConnection,
    name: str,
    arch: ModelArch,
    phase: Phase,
    stages: tuple[Stage, ...],
    tables: Mapping[StageKey, PerfTable],
    max_batch: int | None,
    cost_usd_per_hr: float | None,
    counter: ClampCounter,
) -> InstancePerf:
    dtype = arch.default_dtype
    prefill = _stage_tables(arch.model, stages, Phase.PREFILL, dtype, tables)
    decode = _stage_tables(arch.model, stages, Phase.DECODE, dtype, tables)
    needed = [] if phase is Phase.DECODE else [("prefill", prefill)]
    needed += [] if phase is Phase.PREFILL else [("decode", decode)]
    for label, found in needed:
        if found is None:
            raise KeyError(f"{name}: no {label} profile for every stage of {stages} ({dtype})")
    present = [t for t in (prefill or []) + (decode or [])]
    gpus = sum(s.tp for s in stages)
    return from_tables(
        name,
        prefill or [],
        decode or [],
        usd_per_hr=cost_usd_per_hr or _gpu_cost(con, stages),
        gpus=gpus,
        kv_capacity_tokens=_kv_capacity(present, name),
        kv_bytes_per_token=_kv_bytes_per_token(present, stages, arch, dtype),
        max_batch=max_batch or 256,
        counter=counter,
    )


def _stage_tables(
    model: str,
    stages: tuple[Stage, ...],
    phase: Phase,
    dtype: Dtype,
    tables: Mapping[StageKey, PerfTable],
) -> list[PerfTable] | None:
    """Each stage's table at its layer count, interpolated in layers between profiled counts
    (planning.perf_table.table_at_layers); None when a stage shape was never profiled."""
    found = []
    for s in stages:
        shape = [
            t for k, t in tables.items()
            if (k.model, k.gpu_type, k.tp, k.phase, k.dtype) == (model, s.gpu_type, s.tp, phase, dtype)
        ]  # fmt: skip
        if not shape:
            return None
        found.append(table_at_layers(shape, s.num_layers))
    return found


def _kv_capacity(tables: Sequence[PerfTable], name: str) -> int:
    capacities = [t.max_kv_tokens for t in tables if t.max_kv_tokens]
    if not capacities:
        raise KeyError(f"{name}: profiles record no max_kv_tokens; cannot bound the KV cache")
    return int(min(capacities))


def _kv_bytes_per_token(
    tables: Sequence[PerfTable], stages: tuple[Stage, ...], arch: ModelArch, dtype: Dtype
) -> float:
    per_stage = {(t.key.gpu_type, t.key.tp, t.key.num_layers): t.kv_gib_per_token for t in tables}
    values = [per_stage.get((s.gpu_type, s.tp, s.num_layers)) for s in stages]
    if all(v for v in values):
        return sum(v * s.tp * GIB for v, s in zip(values, stages, strict=True) if v)
    if arch.attention == "mla" and arch.kv_lora_rank and arch.qk_rope_head_dim:
        width = arch.kv_lora_rank + arch.qk_rope_head_dim
    else:
        width = 2 * arch.num_kv_heads * arch.head_dim
    return float(arch.num_layers * width * dtype.bytes_per_param)


def _gpu_cost(con: duckdb.DuckDBPyConnection, stages: tuple[Stage, ...]) -> float:
    total = 0.0
    for s in stages:
        row = con.execute(
            "SELECT ondemand_usd_per_gpu_hr FROM gpu_prices WHERE gpu_type = ?", [s.gpu_type]
        ).fetchone()
        total += (row[0] or 0.0) * s.tp if row else 0.0
    return total


def _specs(
    con: duckdb.DuckDBPyConnection, plan_id: str, rows: list[tuple]
) -> tuple[ModelSpec, ...]:
    """SLOs per model: the plan's workload rows, else the template's workload class."""
    found = {
        m: ModelSpec(m, ttft, tpot, "", prio)
        for m, ttft, tpot, prio in con.execute(
            "SELECT w.model, w.ttft_slo_s, w.tpot_slo_s, w.priority FROM plans p "
            "JOIN workloads w USING (workload_id) WHERE p.plan_id = ?",
            [plan_id],
        ).fetchall()
    }
    for _, model, *_rest, workload_class, _cloud in rows:
        if model not in found:
            slo = con.execute(
                "SELECT ttft_slo_s, tpot_slo_s FROM workload_classes WHERE workload_class = ?",
                [workload_class],
            ).fetchone()
            if slo is None:
                raise KeyError(f"no SLOs for model {model!r}: no workload row, unknown class")
            found[model] = ModelSpec(model, slo[0], slo[1], workload_class)
    return tuple(found[m] for m in sorted(found))


def _rates(con: duckdb.DuckDBPyConnection, plan_id: str) -> dict[str, float]:
    rows = con.execute(
        "SELECT model, sum(pd_rate_req_per_s + coloc_rate_req_per_s) FROM plan_demand "
        "WHERE plan_id = ? GROUP BY model",
        [plan_id],
    ).fetchall()
    return {m: float(r) for m, r in rows}


def stranded_instances(plan: PlanInstances) -> list[str]:
    """Instances no request can reach (a plan defect the run makes visible): a prefill instance
    with no decode instance of its model in its region (KV cache never crosses regions), or any
    instance in a region where the plan records no demand for its model."""
    decoders = {
        (i.perf.model, r) for i, r in zip(plan.instances, plan.regions, strict=True)
        if i.role is not Phase.PREFILL
    }  # fmt: skip
    out = []
    for inst, region in zip(plan.instances, plan.regions, strict=True):
        split = plan.region_split.get(inst.perf.model)
        no_demand = split is not None and region not in split
        if no_demand or (inst.role is Phase.PREFILL and (inst.perf.model, region) not in decoders):
            out.append(inst.perf.name)
    return out


def _region_split(con: duckdb.DuckDBPyConnection, plan_id: str) -> dict[str, dict[str, float]]:
    """Per model, its demand (req/s, P/D + colocated) in each region with a positive rate."""
    split: dict[str, dict[str, float]] = {}
    for model, region, rate in con.execute(
        "SELECT model, region, pd_rate_req_per_s + coloc_rate_req_per_s FROM plan_demand "
        "WHERE plan_id = ? ORDER BY model, region",
        [plan_id],
    ).fetchall():
        if rate > 0:
            split.setdefault(model, {})[region] = float(rate)
    return split


def per_model_detail(result: SimResult) -> dict[str, dict[str, float]]:
    """Per model: SLO attainment, TTFT p99, the queue before prefill (p50/p90/p99 s) and the
    mean utilisation of its instances by final role, to tell queueing from capacity."""
    detail: dict[str, dict[str, float]] = {}
    for m in result.per_model:
        done = [r for r in result.per_request if r.model == m.model]
        queue = [r.queue_s for r in done]
        row = {
            "slo_attainment": m.slo_attainment,
            "ttft_p99_s": percentile([r.ttft_s for r in done], 0.99),
            "queue_p50_s": percentile(queue, 0.5),
            "queue_p90_s": percentile(queue, 0.9),
            "queue_p99_s": percentile(queue, 0.99),
        }
        for role in Phase:
            usage = [
                u.utilisation
                for u in result.instances
                if (u.model, u.final_role) == (m.model, role)
            ]
            if usage:
                row[f"{role.value}_utilisation"] = sum(usage) / len(usage)
        detail[m.model] = row
    return detail


def store_sim_run(
    con: duckdb.DuckDBPyConnection,
    result: SimResult,
    plan_id: str | None,
    trace: str,
    wall_s: float,
    params: Mapping[str, Any] | None = None,
) -> str:
    """Insert one `sim_runs` row for `result`; returns its new id."""
    sim_run_id = f"sim-{uuid.uuid4().hex[:12]}"
    extra = {
        "drop_reasons": dict(result.drop_reasons),
        "unfinished": result.unfinished,
        "events": result.events,
        "mean_utilisation": result.mean_utilisation,
        "e2e_p50_s": result.e2e_p50_s,
        "e2e_p99_s": result.e2e_p99_s,
        "perf_clamped_lookups": result.perf_clamped_lookups,
        "per_model_slo_attainment": {m.model: m.slo_attainment for m in result.per_model},
        "role_changes": len(result.role_changes),
        "per_model": per_model_detail(result),
        **(params or {}),
    }
    con.execute(
        "INSERT INTO sim_runs (sim_run_id, plan_id, trace, policy, seed, wall_s, simulated_s, "
        "requests, completed, dropped, slo_attainment, goodput_req_per_s, ttft_p50_s, "
        "ttft_p99_s, tpot_p50_s, tpot_p99_s, gpu_hours, cost_usd, params) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [
            sim_run_id, plan_id, trace, result.policy, result.seed, wall_s, result.simulated_s,
            result.requests, result.completed, result.dropped, result.slo_attainment,
            result.goodput_req_per_s, result.ttft_p50_s, result.ttft_p99_s, result.tpot_p50_s,
            result.tpot_p99_s, result.gpu_hours, result.cost_usd, json.dumps(extra),
        ],
    )  # fmt: skip
    return sim_run_id


@dataclass(frozen=True, slots=True)
class SimRunSummary:
    """What the replan flow needs from one verification run (the row stored in `sim_runs`)."""

    sim_run_id: str
    plan_id: str
    trace: str
    policy: str
    seed: int
    requests: int
    completed: int
    dropped: int
    slo_attainment: float
    goodput_req_per_s: float
    ttft_p99_s: float
    tpot_p99_s: float
    gpu_hours: float
    cost_usd: float
    wall_s: float
    per_model_slo_attainment: Mapping[str, float]


def simulate_plan(
    db_path: Path | str,
    plan_id: str,
    trace: str | Path | Trace = "conv",
    policy: RouterPolicy | str = RouterPolicy.STATIC,
    seed: int = 0,
    link_gbps: float = DEFAULT_LINK_GBPS,
    timeout_s: float = 60.0,
) -> SimRunSummary:
    """Replay `trace` (code | conv | a CSV path | a Trace) on the plan's instances; store the run.

    One model: the trace as is. Several: each model gets a time-shifted slice of the trace at
    the plan's demand rate for it (`plan_demand`), or an equal share when none is recorded.
    Each model's requests arrive in the plan's regions in proportion to its per-region demand
    and are served there.
    """
    with read_connection(db_path, timeout_s=timeout_s) as con:
        plan = read_plan_instances(con, plan_id)
    base = trace if isinstance(trace, Trace) else load_trace(trace)
    workload = assign_models(base, plan.specs, dict(plan.rates_req_per_s))
    started = time.perf_counter()
    config = SimConfig(link_gbps=link_gbps, seed=seed, region_split=plan.region_split)
    result = run(workload, plan.instances, make_router(policy), config)
    wall_s = time.perf_counter() - started
    trace_name = base.name if isinstance(trace, Trace) else str(trace)
    with write_transaction(db_path, timeout_s=timeout_s) as con:
        params = {"link_gbps": link_gbps, "stranded_instances": stranded_instances(plan)}
        sim_run_id = store_sim_run(con, result, plan_id, trace_name, wall_s, params)
    return SimRunSummary(
        sim_run_id, plan_id, trace_name, result.policy, seed, result.requests, result.completed,
        result.dropped, result.slo_attainment, result.goodput_req_per_s, result.ttft_p99_s,
        result.tpot_p99_s, result.gpu_hours, result.cost_usd, wall_s,
        {m.model: m.slo_attainment for m in result.per_model},
    )  # fmt: skip
