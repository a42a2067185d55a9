"""What every profiler backend offers, and the job/result values they exchange.

A `ProfileJob` is one stage shape's whole grid: (model, GPU type, TP, layers held, phase,
dtype) x batch sizes x sequence lengths. A backend turns a job into a `JobResult`: a full
latency matrix (no holes) plus the stage's memory figures. Backends are registered in
`profiling.backends` under a `BackendName`.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

from planning.domain import Dtype, GpuType, ModelArch, Phase, ProfilePoint


class BackendName(StrEnum):
    AUTO = "auto"  # aic where it covers the (model, GPU, dtype), else analytic
    AIC = "aic"
    ANALYTIC = "analytic"
    VLLM = "vllm"


@dataclass(frozen=True, slots=True)
class ProfileJob:
    """One stage shape's grid for one concrete backend (never AUTO)."""

    model: ModelArch
    gpu: GpuType
    tp: int
    num_layers: int
    phase: Phase
    dtype: Dtype
    backend: BackendName
    batch_sizes: tuple[int, ...]
    seq_lens: tuple[int, ...]

    @property
    def stage_key(self) -> tuple[str, str, int, int, str, str]:
        return (
            self.model.model,
            self.gpu.gpu_type,
            self.tp,
            self.num_layers,
            str(self.phase),
            str(self.dtype),
        )

    @property
    def num_points(self) -> int:
        return len(self.batch_sizes) * len(self.seq_lens)

    def describe(self) -> str:
        return (
            f"{self.model.model} on {self.tp}x{self.gpu.gpu_type}, {self.num_layers} layers, "
            f"{self.phase}, {self.dtype}"
        )


@dataclass(frozen=True, slots=True)
class JobResult:
    """A job's latencies: `latency_ms[i][j]` at (batch_sizes[i], seq_lens[j])."""

    job: ProfileJob
    backend: str  # the backend that produced the numbers (aic may fall back to analytic)
    backend_version: str
    latency_ms: tuple[tuple[float, ...], ...]
    weights_gib: float
    kv_gib_per_token: float
    max_kv_tokens: int
    measured_on: str | None = None
    note: str = ""  # why a fallback happened, if it did

    def points(self) -> list[ProfilePoint]:
        job = self.job
        return [
            ProfilePoint(
                model=job.model.model,
                gpu_type=job.gpu.gpu_type,
                tp=job.tp,
                num_layers=job.num_layers,
                phase=job.phase,
                dtype=job.dtype,
                batch_size=batch,
                seq_len_tokens=seq,
                latency_ms=self.latency_ms[i][j],
                backend=self.backend,
                backend_version=self.backend_version,
                weights_gib=self.weights_gib,
                kv_gib_per_token=self.kv_gib_per_token,
                max_kv_tokens=self.max_kv_tokens,
            )
            for i, batch in enumerate(job.batch_sizes)
            for j, seq in enumerate(job.seq_lens)
        ]


class ProfilerBackend(Protocol):
    name: BackendName

    def covers(self, model: ModelArch, gpu: GpuType, dtype: Dtype) -> bool:
        """Whether this backend can produce numbers for the pair (cheap, no heavy import)."""
        ...

    def expected_version(self, job: ProfileJob) -> str | None:
        """The backend_version a run would record (None: only known after measuring)."""
        ...

    def run(self, job: ProfileJob) -> JobResult:
        """Produce the job's full grid; raises ProfileInputError naming a bad input."""
        ...
