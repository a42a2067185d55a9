"""Run the profiling grid on Dask and write the results into the catalog with one writer.

Flow: read models and GPU types from the catalog -> build the job grid (profiling.grid) ->
drop jobs whose points are already stored for the same backend and version (resume) ->
group jobs into chunks (profiling.grid.chunk_jobs: one per GPU for AIConfigurator,
submitted first; one per (model, GPU) otherwise) -> `client.submit` every chunk
(vLLM chunks carry `resources={"GPU-<type>": 1}`) -> as chunks complete, their rows are
buffered and upserted in batches, each batch in one short write transaction.

A crash loses at most the unflushed buffer; a rerun skips every stage already written and
recomputes the rest (the primary key makes replays idempotent).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
from distributed import Client, LocalCluster, as_completed

from catalog_db import queries
from catalog_db.connection import read_connection, write_transaction
from catalog_db.profiles import PROFILE_COLUMNS, stage_point_counts, upsert_frame
from planning.domain import Dtype, GpuType, ModelArch
from profiling.analytic import ProfileInputError
from profiling.backends import get_backend, run_jobs
from profiling.base_backend import BackendName, JobResult, ProfileJob
from profiling.grid import Shapes, build_jobs, chunk_jobs
from profiling.vllm_backend import dask_resources

_ARROW_SCHEMA = pa.schema(
    [
        ("model", pa.string()), ("gpu_type", pa.string()), ("tp", pa.int32()),
        ("num_layers", pa.int32()), ("phase", pa.string()), ("dtype", pa.string()),
        ("batch_size", pa.int32()), ("seq_len_tokens", pa.int32()), ("backend", pa.string()),
        ("backend_version", pa.string()), ("latency_ms", pa.float64()),
        ("weights_gib", pa.float64()), ("kv_gib_per_token", pa.float64()),
        ("max_kv_tokens", pa.int64()), ("measured_on", pa.string()),
    ]
)  # fmt: skip

ProgressCallback = Callable[[int, int, int], None]
"""(jobs done, jobs to run, points written so far)."""


@dataclass(frozen=True, slots=True)
class ProfilingSummary:
    jobs_total: int
    jobs_skipped: int  # already in the catalog for the same backend and version
    jobs_run: int
    jobs_fallback: int  # aic jobs that fell back to analytic (see `fallback_notes`)
    points_written: int
    seconds: float
    workers: int
    fallback_notes: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ChunkOutcome:
    """What one Dask task sends back: rows ready for the table, and fallback notes."""

    rows: pa.Table
    jobs: int
    fallback_notes: tuple[str, ...]


_PER_JOB_COLUMNS = tuple(
    name for name in PROFILE_COLUMNS if name not in ("batch_size", "seq_len_tokens", "latency_ms")
)


def results_table(results: Sequence[JobResult]) -> pa.Table:
    """Table rows of job results, built column-wise: each per-job value once, repeated over
    the job's points by one Arrow `take` (no per-point Python objects)."""
    if not results:
        return _ARROW_SCHEMA.empty_table()
    per_job: dict[str, list] = {name: [] for name in _PER_JOB_COLUMNS}
    for result in results:
        job = result.job
        values = (
            job.model.model, job.gpu.gpu_type, job.tp, job.num_layers, str(job.phase),
            str(job.dtype), result.backend, result.backend_version, result.weights_gib,
            result.kv_gib_per_token, result.max_kv_tokens, result.measured_on,
        )  # fmt: skip
        for name, value in zip(_PER_JOB_COLUMNS, values, strict=True):
            per_job[name].append(value)
    counts = [r.job.num_points for r in results]
    owner = pa.array(np.repeat(np.arange(len(results)), counts))
    numeric = {
        "batch_size": np.concatenate(
            [np.repeat(r.job.batch_sizes, len(r.job.seq_lens)) for r in results]
        ),
        "seq_len_tokens": np.concatenate(
            [np.tile(r.job.seq_lens, len(r.job.batch_sizes)) for r in results]
        ),
        "latency_ms": np.concatenate(
            [np.asarray(r.latency_ms, dtype=float).ravel() for r in results]
        ),
    }
    arrays = [
        pa.array(numeric[field.name], field.type)
        if field.name in numeric
        else pa.array(per_job[field.name], field.type).take(owner)
        for field in _ARROW_SCHEMA
    ]
    return pa.Table.from_arrays(arrays, schema=_ARROW_SCHEMA)


def run_chunk(chunk: Sequence[ProfileJob]) -> ChunkOutcome:
    """The Dask task: run a chunk of jobs and turn their grids into table rows."""
    results = run_jobs(chunk)
    notes = tuple(f"{r.job.describe()}: {r.note}" for r in results if r.note)
    return ChunkOutcome(results_table(results), len(results), notes)


def load_inputs(
    db_path: Path | str, models: Sequence[str] | None, gpus: Sequence[str] | None
) -> tuple[tuple[ModelArch, ...], tuple[GpuType, ...]]:
    """Catalog models and GPU types by name (None: all); unknown names raise naming them."""
    with read_connection(db_path) as con:
        try:
            model_archs = (
                tuple(queries.model(con, m) for m in models) if models else queries.models(con)
            )
            gpu_types = (
                tuple(queries.gpu_type(con, g) for g in gpus) if gpus else queries.gpu_types(con)
            )
        except KeyError as error:
            raise ProfileInputError(str(error.args[0])) from None
    return model_archs, gpu_types


def pending_jobs(db_path: Path | str, jobs: Sequence[ProfileJob]) -> list[ProfileJob]:
    """Jobs whose full grid is not yet stored for the backend version they would record."""
    with read_connection(db_path) as con:
        counts = stage_point_counts(con)
    any_version: dict[tuple, int] = {}
    for key, count in counts.items():
        short = (*key[:6], key[6])
        any_version[short] = max(any_version.get(short, 0), count)
    pending = []
    for job in jobs:
        version = get_backend(job.backend).expected_version(job)
        if version is None:
            stored = any_version.get((*job.stage_key, str(job.backend)), 0)
        else:
            stored = counts.get((*job.stage_key, str(job.backend), version), 0)
        if stored < job.num_points:
            pending.append(job)
    return pending


@contextmanager
def dask_client(
    scheduler_address: str | None, n_workers: int, processes: bool = True
) -> Iterator[Client]:
    """A client of `scheduler_address`, or of a fresh LocalCluster closed on exit."""
    if scheduler_address:
        with Client(scheduler_address) as client:
            yield client
        return
    with (
        LocalCluster(
            n_workers=n_workers,
            threads_per_worker=1,
            processes=processes,
            dashboard_address=":0",
            silence_logs=logging.ERROR,
        ) as cluster,
        Client(cluster) as client,
    ):
        yield client


def _flush(db_path: Path | str, tables: list[pa.Table]) -> int:
    if not tables:
        return 0
    rows = pa.concat_tables(tables)
    with write_transaction(db_path) as con:
        return upsert_frame(con, rows)


def execute_jobs(
    client: Client,
    db_path: Path | str,
    jobs: Sequence[ProfileJob],
    write_batch_points: int = 100_000,
    on_progress: ProgressCallback | None = None,
) -> tuple[int, tuple[str, ...]]:
    """Submit `jobs` in chunks, stream results to one writer; returns (points, notes)."""
    futures = [
        client.submit(
            run_chunk,
            chunk,
            pure=False,
            resources=dask_resources(chunk[0].gpu.gpu_type)
            if chunk[0].backend is BackendName.VLLM
            else None,
        )
        for chunk in chunk_jobs(jobs)
    ]
    written, done, buffered, frames, notes = 0, 0, 0, [], []
    for future in as_completed(futures):
        outcome: ChunkOutcome = future.result()
        future.release()
        frames.append(outcome.rows)
        notes += outcome.fallback_notes
        buffered += outcome.rows.num_rows
        done += outcome.jobs
        if buffered >= write_batch_points:
            written += _flush(db_path, frames)
            frames, buffered = [], 0
        if on_progress:
            on_progress(done, len(jobs), written)
    written += _flush(db_path, frames)
    if on_progress:
        on_progress(done, len(jobs), written)
    return written, tuple(notes)


def run_profiling(
    db_path: Path | str,
    models: Sequence[str] | None = None,
    gpus: Sequence[str] | None = None,
    backend: BackendName | str = BackendName.AUTO,
    scheduler_address: str | None = None,
    n_workers: int = 2,
    shapes: Shapes | None = None,
    dtypes: Sequence[Dtype] | None = None,
    tps: Sequence[int] | None = None,
    write_batch_points: int = 100_000,
    on_progress: ProgressCallback | None = None,
    processes: bool = True,
) -> ProfilingSummary:
    """Profile `models` x `gpus` (None: all in the catalog) with `backend` into `profiles`.

    `scheduler_address` None starts a LocalCluster of `n_workers` single-threaded worker
    processes (`processes=False`: threads in this process). Returns counts and wall seconds.
    """
    started = time.perf_counter()
    name = BackendName(backend)
    model_archs, gpu_types = load_inputs(db_path, models, gpus)
    jobs = build_jobs(model_archs, gpu_types, name, shapes, dtypes, tps)
    pending = pending_jobs(db_path, jobs)
    written, notes, workers = 0, (), 0
    if pending:
        with dask_client(scheduler_address, n_workers, processes) as client:
            workers = len(client.scheduler_info().get("workers", {}))
            written, notes = execute_jobs(client, db_path, pending, write_batch_points, on_progress)
    return ProfilingSummary(
        jobs_total=len(jobs),
        jobs_skipped=len(jobs) - len(pending),
        jobs_run=len(pending),
        jobs_fallback=len(notes),
        points_written=written,
        seconds=time.perf_counter() - started,
        workers=workers,
        fallback_notes=notes,
    )
