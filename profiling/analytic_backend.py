"""The analytic backend: the calibrated roofline model (profiling.analytic), every GPU type."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from planning.domain import Dtype, GpuType, ModelArch, Phase
from profiling.analytic import (
    ProfileInputError,
    StageMemory,
    StageSpec,
    decode_latency_ms,
    prefill_latency_ms,
    stage_memory,
    validate_stage,
)
from profiling.base_backend import BackendName, JobResult, ProfileJob
from profiling.calibration import constants_digest, efficiency_for, memory_constants

MODEL_VERSION = "roofline-1"  # bump when the equations change


def analytic_version() -> str:
    """Equations version + hash of the calibration data: recalibrating makes new rows."""
    return f"{MODEL_VERSION}+calib-{constants_digest()}"


def spec_of(job: ProfileJob) -> StageSpec:
    return StageSpec(job.model, job.gpu, job.tp, job.num_layers, job.dtype)


def checked_memory(spec: StageSpec) -> StageMemory:
    """Stage memory, refusing a stage whose weights and reserve leave no KV cache."""
    validate_stage(spec.model, spec.gpu, spec.tp, spec.num_layers)
    memory = stage_memory(spec, memory_constants())
    if memory.max_kv_tokens <= 0:
        raise ProfileInputError(
            f"{spec.model.model} with {spec.num_layers} layers at tp={spec.tp} does not fit "
            f"{spec.gpu.gpu_type} ({spec.gpu.memory_gib:g} GiB): weights need "
            f"{memory.weights_gib:.1f} GiB per GPU"
        )
    return memory


def analytic_latency_grid(job: ProfileJob) -> np.ndarray:
    """Latency (ms) at every (batch, seq) of the job, shape (batches, seq_lens)."""
    return _latency_grids([job])[0]


def _latency_grids(jobs: Sequence[ProfileJob]) -> np.ndarray:
    """Grids of jobs that differ only in layers held, shape (jobs, batches, seq_lens), in one
    vectorised evaluation (the same arithmetic per element as one job at a time)."""
    first = jobs[0]
    spec = spec_of(first)
    eff = efficiency_for(first.gpu.gpu_type)
    batch = np.asarray(first.batch_sizes, dtype=float)[:, None]
    seq = np.asarray(first.seq_lens, dtype=float)[None, :]
    layers = np.asarray([job.num_layers for job in jobs], dtype=float)[:, None, None]
    latency = prefill_latency_ms if first.phase == Phase.PREFILL else decode_latency_ms
    return latency(spec, eff, memory_constants(), batch, seq, layers)


def analytic_results(jobs: Sequence[ProfileJob]) -> list[JobResult]:
    """Analytic results of `jobs`, in order; jobs that differ only in the layers they hold
    (a stage shape's layer options) share one evaluation."""
    groups: dict[tuple, list[int]] = {}
    for i, job in enumerate(jobs):
        key = (job.model, job.gpu, job.tp, job.dtype, job.phase, job.batch_sizes, job.seq_lens)
        groups.setdefault(key, []).append(i)
    results: dict[int, JobResult] = {}
    for indices in groups.values():
        members = [jobs[i] for i in indices]
        for i, job, grid in zip(indices, members, _latency_grids(members), strict=True):
            results[i] = _result(job, grid)
    return [results[i] for i in range(len(jobs))]


@dataclass(frozen=True, slots=True)
class AnalyticBackend:
    name: BackendName = BackendName.ANALYTIC

    def covers(self, model: ModelArch, gpu: GpuType, dtype: Dtype) -> bool:
        return True

    def expected_version(self, job: ProfileJob) -> str | None:
        return analytic_version()

    def run(self, job: ProfileJob) -> JobResult:
        return analytic_result(job)


def analytic_result(job: ProfileJob, note: str = "") -> JobResult:
    return _result(job, analytic_latency_grid(job), note)


def _result(job: ProfileJob, grid: np.ndarray, note: str = "") -> JobResult:
    memory = checked_memory(spec_of(job))
    return JobResult(
        job=job,
        backend=str(BackendName.ANALYTIC),
        backend_version=analytic_version(),
        latency_ms=tuple(map(tuple, grid.tolist())),
        weights_gib=memory.weights_gib,
        kv_gib_per_token=memory.kv_gib_per_token,
        max_kv_tokens=memory.max_kv_tokens,
        note=note,
    )
