"""Simulator speed on the 1-hour Azure conv trace (16-instance P/D), and forecast error.

Run alone: `.venv/bin/python -m benchmarks.run simulator`.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path

from catalog_db.connection import read_connection
from catalog_db.queries import gpu_type, model
from catalog_db.setup import init_catalog
from catalog_db.traces import load_trace
from planning import simulator
from planning.domain import Dtype, Phase
from planning.forecast import ForecastParams, backtest
from planning.perf_table import build_tables
from planning.routing import make_router
from planning.routing.instance_perf import InstancePerf, from_tables
from planning.simulator import SimInstance, SimResult
from planning.workload import ModelSpec, Workload, scale_rate, summarise
from profiling.analytic_backend import analytic_result
from profiling.base_backend import BackendName, ProfileJob

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
GPU = "H100-SXM"
PREFILL, DECODE = 6, 10  # 16 instances, one H100 each
REPEATS = 3
BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256)
SEQS = (128, 256, 512, 1024, 2048, 4096, 8192, 16384)


def instance_perf() -> tuple[InstancePerf, float]:
    """Llama-3.1-8B on one H100 from the analytic (calibrated roofline) profiler; $/GPU-hour."""
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "bench.duckdb"
        init_catalog(db)
        with read_connection(db) as con:
            arch, gpu = model(con, MODEL), gpu_type(con, GPU)
            row = con.execute(
                "SELECT ondemand_usd_per_gpu_hr FROM gpu_prices WHERE gpu_type = ?", [GPU]
            ).fetchone()
    price = float(row[0]) if row and row[0] else 0.0
    results = {
        phase: analytic_result(
            ProfileJob(
                arch,
                gpu,
                1,
                arch.num_layers,
                phase,
                Dtype.BF16,
                BackendName.ANALYTIC,
                BATCHES,
                SEQS,
            )
        )
        for phase in (Phase.PREFILL, Phase.DECODE)
    }
    tables = build_tables(p for r in results.values() for p in r.points())
    pre = [t for k, t in tables.items() if k.phase is Phase.PREFILL]
    dec = [t for k, t in tables.items() if k.phase is Phase.DECODE]
    memory = results[Phase.DECODE]
    perf = from_tables(
        f"{MODEL}@1x{GPU}", pre, dec, usd_per_hr=price, gpus=1,
        kv_capacity_tokens=memory.max_kv_tokens,
        kv_bytes_per_token=memory.kv_gib_per_token * 2**30,
    )  # fmt: skip
    return perf, price


def simulate(workload: Workload, perf: InstancePerf) -> tuple[float, float, SimResult]:
    instances = [SimInstance(perf, Phase.PREFILL)] * PREFILL
    instances += [SimInstance(perf, Phase.DECODE)] * DECODE
    cpus, walls, result = [], [], None
    for _ in range(REPEATS):
        cpu0, wall0 = time.process_time(), time.perf_counter()
        result = simulator.run(workload, instances, make_router("static"))
        cpus.append(time.process_time() - cpu0)
        walls.append(time.perf_counter() - wall0)
    assert result is not None
    return statistics.median(cpus), statistics.median(walls), result


def speed_rows(perf: InstancePerf) -> list[str]:
    base = load_trace("conv", model=MODEL)
    spec = ModelSpec(MODEL, ttft_slo_s=1.0, tpot_slo_s=0.05)  # workload class 'chat'
    rows = []
    for factor in (1, 2, 4):
        trace = base if factor == 1 else scale_rate(base, float(factor))
        cpu_s, wall_s, r = simulate(Workload(trace, (spec,)), perf)
        rows.append(
            f"| {factor}x | {r.requests:,} | {r.events:,} | {cpu_s:.2f} | {wall_s:.2f} | "
            f"{trace.duration_s / cpu_s:,.0f}x | {r.events / cpu_s:,.0f} | "
            f"{r.slo_attainment:.3f} | {r.ttft_p99_s:.3f} | {r.tpot_p99_s * 1000:.1f} | "
            f"{r.mean_utilisation:.2f} | {r.cost_usd:.2f} |"
        )
    return rows


def forecast_rows() -> list[str]:
    rows = []
    configs = {
        "Holt a=0.5 b=0.1": ForecastParams(0.5, 0.1, 0.9),
        "EWMA a=0.3": ForecastParams(0.3, 0.0, 0.9),
        "last value": ForecastParams(1.0, 0.0, 0.9),
    }
    for name in ("conv", "code"):
        trace = load_trace(name)
        for window_s in (60.0, 300.0):
            history = [s.rate_req_per_s for s in summarise(trace, window_s)][:-1]  # drop partial
            for label, params in configs.items():
                e = backtest(history, params)
                rows.append(
                    f"| {name} | {window_s:.0f} | {label} | {e.windows} | {e.mape * 100:.1f}% | "
                    f"{e.rmse_req_per_s:.2f} | {e.coverage:.2f} | {e.mean_headroom_fraction:.2f} |"
                )
    return rows


def run() -> str:
    perf, price = instance_perf()
    speed = speed_rows(perf)
    lines = [
        "## Simulator (issue 7)",
        "",
        "Command: `.venv/bin/python -m benchmarks.run simulator` (one process, one core; the "
        "simulator is single-threaded Python). Shared 2-core machine with other engineers' jobs "
        "running, so the speed figures use CPU time of the process (`time.process_time`); "
        "wall time is shown beside it.",
        "",
        f"Deployment: {PREFILL} prefill + {DECODE} decode instances of {MODEL} on 1x{GPU} each, "
        f"perf from the analytic profiler (PerfTables of {len(BATCHES)}x{len(SEQS)} points), "
        f"static least-loaded router, 400 Gb/s P->D link, ${price:.2f}/GPU-hour. "
        "Trace: Azure LLM inference 2023 conv (19,366 requests, 3,502 s); 2x and 4x by "
        "`workload.scale_rate` (compressed and tiled over the same hour). SLOs TTFT 1 s, "
        f"TPOT 50 ms. Times: median of {REPEATS} runs, including building the results.",
        "",
        "| rate | requests | events | CPU s | wall s | x real time (CPU) | events/s (CPU) | "
        "SLO att. | TTFT p99 s | TPOT p99 ms | mean util. | $ |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
        *speed,
        "",
        "Side-by-side with Vidur or DistServe's simdistserve: not run. Neither is installed "
        "in this environment, both need their own profiled operator data for the GPU/model "
        "(Vidur's CSVs live in its Git repo, not on PyPI) and this workplace reaches only PyPI, "
        "so no ratio is reported.",
        "",
        "### Demand forecast error (one-step-ahead backtest on the traces)",
        "",
        "Per-window request rate, forecast from the windows before it (after 3); headroom = "
        "0.9-quantile of past under-forecasts. Coverage = fraction of windows whose actual rate "
        "<= point x (1 + headroom).",
        "",
        "| trace | window s | forecaster | windows | MAPE | RMSE req/s | coverage | mean headroom |",
        "|---|---|---|---|---|---|---|---|",
        *forecast_rows(),
    ]
    return "\n".join(lines)
