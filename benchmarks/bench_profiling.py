"""Profiling throughput (full auto grid and the demo set, 1 vs 2 Dask workers) and analytic-model error vs its references.

Run: `python -m benchmarks.run profiling`.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from pathlib import Path

from catalog_db.setup import init_catalog
from profiling.calibration import fit_report
from profiling.grid import build_jobs
from profiling.runner import load_inputs, run_profiling

DEMO_MODELS = [
    "meta-llama/Llama-3.1-8B-Instruct",
    "Qwen/Qwen3-8B",
    "Qwen/Qwen3-30B-A3B",
    "meta-llama/Llama-3.1-70B-Instruct",
]
DEMO_GPUS = ["H100-SXM", "A100-SXM-80GB", "L40S", "L4", "A10G", "T4"]
REPEATS = 1  # the shared 2-core machine is slow; raise on a quiet one


def _timed_run(seed: Path, workers: int, models, gpus, backend: str) -> tuple[float, int, float]:
    """(wall s, points written, 1-min load average just before) of one run on a fresh copy."""
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "c.duckdb"
        db.write_bytes(seed.read_bytes())
        load = os.getloadavg()[0]
        started = time.perf_counter()
        summary = run_profiling(db, models, gpus, backend, n_workers=workers)
        return time.perf_counter() - started, summary.points_written, load


def _throughput_rows(seed: Path, models, gpus, backend: str, label: str) -> list[str]:
    rows, walls = [], {}
    for workers in (1, 2):
        times, loads = [], []
        for _ in range(REPEATS):
            wall, points, load = _timed_run(seed, workers, models, gpus, backend)
            times.append(wall)
            loads.append(load)
        walls[workers] = statistics.median(times)
        rows.append(f"| {label} | {backend} | {workers} | {points:,} | {walls[workers]:.1f} | "
                    f"{points / walls[workers]:,.0f} | {max(loads):.1f} |")  # fmt: skip
    rows.append(f"| {label} | speed-up 2 vs 1 workers | | | {walls[1] / walls[2]:.2f}x | | |")
    return rows


def run() -> str:
    seed = Path(tempfile.mkdtemp(prefix="coral-bench-")) / "seed.duckdb"
    init_catalog(seed)
    models, gpus = load_inputs(seed, None, None)
    started = time.perf_counter()
    jobs = build_jobs(models, gpus)
    grid_s = time.perf_counter() - started
    lines = [
        "## Profiling",
        "",
        "Command: `python -m benchmarks.run profiling` (benchmarks/bench_profiling.py). "
        f"**Machine shared**: {os.cpu_count()} cores shared with other engineers' builds and "
        "tests while this ran (the load column is the 1-minute load average just before each "
        "run; above 2 means other work was competing for the 2 cores), so wall times vary "
        "run to run and a quiet machine would be faster. Each run starts its own Dask "
        "LocalCluster (~3 s, included) on a fresh copy of the seeded catalog; the writer "
        "(DuckDB upserts) runs in the client process and shares the same 2 cores, which caps "
        "the 1 -> 2 worker speed-up.",
        "",
        f"Full auto grid over {len(models)} models x {len(gpus)} GPU types: {len(jobs):,} jobs, "
        f"{sum(j.num_points for j in jobs):,} points; building the grid took {grid_s:.2f} s.",
        "",
        f"| set | backend | Dask workers | points | wall s (median of {REPEATS}) | points/s "
        "| load before |",
        "|---|---|---|---|---|---|---|",
    ]
    lines += _throughput_rows(seed, None, None, "auto", f"full grid: {len(models)} models x "
                              f"{len(gpus)} GPUs")  # fmt: skip
    lines += _throughput_rows(seed, DEMO_MODELS, DEMO_GPUS, "auto", "demo: 4 models x 6 GPUs")
    lines += [
        "",
        "Analytic model error (|predicted - reference| / reference), constants in "
        "catalog_db/data/calibration/efficiency.csv, refit by `python -m profiling.calibrate`:",
        "",
        "| family | reference | points | median abs error | max abs error |",
        "|---|---|---|---|---|",
    ]
    for row in fit_report():
        lines.append(f"| {row.family} | {row.reference} | {row.points} | "
                     f"{row.median_abs_err:.1%} | {row.max_abs_err:.1%} |")  # fmt: skip
    lines += [
        "",
        "aic = AIConfigurator 0.12 vLLM predictions (prefill and decode steps of Llama-3.1-8B "
        "TP1/2, Qwen3-32B TP2, Llama-3.1-70B TP4, Qwen3-30B-A3B, Mixtral-8x7B TP2); published = "
        "published_points.csv (hopper: TensorRT-LLM FP8 H200 rows 12-18, not fitted - another "
        "engine; cdna3: vLLM MI300X rows 19-21, fitted on those 3 rows, so its error is "
        "in-sample).",
    ]
    return "\n".join(lines)
