"""`nightly-profiling` flow: profile the model x GPU grid on Dask, then rebuild templates.

Dask choice: the profiling library maps its jobs on a `distributed.Client` itself (a
LocalCluster, or any scheduler address), and this flow wraps that call in one Prefect task
instead of using `prefect_dask.DaskTaskRunner` with a Prefect task per job. The grid has
thousands of small jobs (one per model x GPU x TP x layers x phase); a Prefect task per job
would add several API round trips and state rows per job to the Prefect server, while the
client streams results to ONE writer, which is what DuckDB's single-writer rule asks for.
Resuming is the library's: points already in the catalog for the same backend and version are
skipped, so a killed run restarts where it stopped. vLLM jobs carry Dask worker resources
(`GPU-<type>`), so they only land on workers started on that GPU type.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from prefect import flow

from flows.tasks import build_templates_task, init_catalog_task, profile_task


@flow(name="nightly-profiling", log_prints=True)
def nightly_profiling(
    db: Path = Path("coral.duckdb"),
    models: list[str] | None = None,
    gpus: list[str] | None = None,
    backend: Literal["auto", "aic", "analytic", "vllm"] = "auto",
    dask_scheduler: str | None = None,
    dask_workers: int = 2,
    rebuild_templates: bool = True,
) -> int:
    """Profile `models` x `gpus` (None: everything in the catalog); returns points written."""
    init_catalog_task(db)
    summary = profile_task(db, models, gpus, backend, dask_scheduler, dask_workers)
    print(
        f"profiled {summary.jobs_run} jobs ({summary.jobs_skipped} already done), "
        f"{summary.points_written} points in {summary.seconds:.1f} s on {summary.workers} workers"
    )
    if rebuild_templates:
        build_templates_task(db, models)
    return summary.points_written
