"""The analytic backend: the calibrated roofline model (profiling.analytic), every GPU type."""

from __future__ import annotations

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
    spec = spec_of(job)
    eff = efficiency_for(job.gpu.gpu_type)
    batch = np.asarray(job.batch_sizes, dtype=float)[:, None]
    seq = np.asarray(job.seq_lens, dtype=float)[None, :]
    if job.phase == Phase.PREFILL:
        return prefill_latency_ms(spec, eff, memory_constants(), batch, seq)
    return decode_latency_ms(spec, eff, memory_constants(), batch, seq)


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
    memory = checked_memory(spec_of(job))
    grid = analytic_latency_grid(job)
    return JobResult(
        job=job,
        backend=str(BackendName.ANALYTIC),
        backend_version=analytic_version(),
        latency_ms=tuple(tuple(float(v) for v in row) for row in grid),
        weights_gib=memory.weights_gib,
        kv_gib_per_token=memory.kv_gib_per_token,
        max_kv_tokens=memory.max_kv_tokens,
        note=note,
    )
